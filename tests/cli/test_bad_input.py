"""Every bad input is one line ``tuner: error: <where>: <what>; fix: <how>`` and exit 2, before
any host time; a failure while running (a server that does not answer) is exit 1. Each row runs
the ``tuner`` command as a user types it, in a folder of its own."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
GLM5 = REPO / "search_spaces" / "glm5.yaml"
# The entry point as the console script runs it; ``hide`` makes a module look not installed
# (sys.modules[name] = None: Python's own "no such module").
RUNNER = ("import sys; [sys.modules.__setitem__(m, None) for m in sys.argv[1].split(',') if m]; "
          "del sys.argv[1]; sys.argv[0] = 'tuner'; from tuner.cli import main; main()")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once the socket is closed


def _misspelt_flag(folder: Path) -> Path:
    text = GLM5.read_text().replace("flag: --schedule-conservativeness", "flag: --schedule-conservativness")
    path = folder / "misspelt.yaml"
    path.write_text(text)
    return path


def _missing_dataset(folder: Path) -> Path:
    document = yaml.safe_load(GLM5.read_text())
    document["workload"]["dataset"] = {"path": "data/chats.jsonl"}
    document["workload"].get("emulated", {}).pop("dataset", None)
    path = folder / "traffic.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _line(space: Path | None) -> str:
    """The line of the mistake a `make` wrote (the error names it)."""
    if space is None:
        return ""
    lines = space.read_text().splitlines()
    return str(next(n for n, line in enumerate(lines, 1) if "conservativness" in line or "chats.jsonl" in line))


# (id, arguments ({space}: a space made by `make`, {port}: a closed port), make, modules to hide,
#  exit code, how the line starts)
CASES = [
    ("bare-command", ["optimize"], None, "", 2, "tuner: error: tuner optimize: SPACE is missing; fix:"),
    ("unknown-option", ["optimize", str(GLM5), "--stratgy", "tpe"], None, "", 2,
     "tuner: error: tuner optimize: no such option --stratgy; fix: did you mean --strategy"),
    ("unknown-choice", ["optimize", str(GLM5), "--emulate", "--strategy", "annealing"], None, "", 2,
     "tuner: error: --strategy annealing: unknown; fix: use one of guided, tpe"),
    ("unknown-command", ["optimise"], None, "", 2, "tuner: error: tuner: No such command 'optimise'"),
    ("engine-flag-dry-run", ["optimize", "{space}", "--emulate", "--dry-run"], _misspelt_flag, "", 2,
     ("tuner: error: {space}:{line}: parameters.schedule_conservativeness.flag: --schedule-conservativness "
     "is not a flag of sglang 0.5.9; fix: did you mean --schedule-conservativeness?")),
    ("dataset-missing", ["optimize", "{space}", "--emulate", "--dry-run"], _missing_dataset, "", 2,
     "tuner: error: {space}:{line}: workload.dataset.path: data/chats.jsonl: dataset file not found; fix:"),
    ("bench-not-a-url", ["bench", "not-a-url"], None, "", 2,
     "tuner: error: URL not-a-url: not an http(s) address; fix:"),
    ("bench-time-limit", ["bench", "http://127.0.0.1:{port}", "--time-limit", "-1"], None, "", 2,
     "tuner: error: --time-limit -1: not above 0 seconds; fix:"),
    ("bench-api", ["bench", "http://127.0.0.1:{port}", "--api", "grpc"], None, "", 2,
     "tuner: error: --api grpc: unknown; fix: use one of sglang, openai, openai-chat"),
    ("bench-dataset", ["bench", "http://127.0.0.1:{port}", "--dataset", "nowhere.json"], None, "", 2,
     "tuner: error: --dataset nowhere.json: dataset file not found; fix:"),
    ("postgres-driver", ["optimize", str(GLM5), "--emulate", "--storage", "postgresql://tuner@127.0.0.1/s"],
     None, "psycopg2", 2, ("tuner: error: --storage postgresql://tuner@127.0.0.1/s: PostgreSQL needs "
     "psycopg2, not installed here; fix: pip install -e '.[postgres]'")),
    ("host-bad", ["doctor", str(GLM5), "--host", "me@[::1"], None, "", 2,
     "tuner: error: --host me@[::1: not [user@]address[:port] or local; fix:"),
    # an IPv6 address in brackets is taken: the command goes on to the key, which is missing
    ("host-ipv6-then-key", ["doctor", str(GLM5), "--host", "me@[::1]:22", "--ssh-key", "no-key"], None, "",
     2, "tuner: error: host.key (or --ssh-key): no-key does not exist; fix:"),
    ("at-below-one", ["best", str(GLM5), "--at", "0"], None, "", 2, "tuner: error: --at: "),
    # a failure while running, not bad input: exit 1, in the same form
    ("bench-closed-port", ["bench", "http://127.0.0.1:{port}", "--concurrency", "4"], None, "", 1,
     "tuner: error: http://127.0.0.1:{port}/server_info: does not answer ("),
]


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_one_line_with_its_exit_code(case: tuple, tmp_path: Path) -> None:
    _, args, make, hide, code, start = case
    space = make(tmp_path) if make is not None else None
    port = _closed_port()
    fill = {"space": str(space), "port": str(port), "line": _line(space)}
    argv = [arg.format(**fill) for arg in args]
    done = subprocess.run([sys.executable, "-c", RUNNER, hide, *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
                          stdin=subprocess.DEVNULL)
    lines = done.stderr.splitlines()
    assert done.returncode == code, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(start.format(**fill)), lines[0]
    assert "; fix: " in lines[0]
    if code == 2:
        assert not (tmp_path / "studies").exists()  # no study made, no host time spent
