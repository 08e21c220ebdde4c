"""The launch script of the best stable trial: what a user deploys.

The script is plain bash (``set -euo pipefail``): secrets are ``${NAME:?}`` references, never
values; each patch is applied with the host's Python and verified (checksum recorded in the
header); the exact command line of the trial; and a wait for readiness (``/health`` 200). The
header records the study, the trial, its measured figures (and their spread when validated), the
engine version and the date. An emulated study's script starts the emulator and says so.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
from optuna.trial import TrialState

from tuner.engines import load_profile
from tuner.errors import ConfigError
from tuner.study.record import (
    EMULATED,
    ENGINE_VERSION,
    PATCH_CHECKSUMS,
    TIME_SCALE,
    VALIDATION,
    TrialRecord,
    best_stable,
    records,
    trial_figure,
)

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["render_launch_script", "write_launch_script"]


_PATCH_PY = r"""
import hashlib, importlib.util, json, os, sys
patch = json.loads(sys.argv[1])
spec = importlib.util.find_spec(patch["package"])
if spec is None or spec.origin is None:
    sys.exit(f"patch {patch['name']}: package {patch['package']} not found by this python")
path = os.path.join(os.path.dirname(spec.origin), patch["file"])
text = open(path, encoding="utf-8").read()
if text.count(patch["replace"]) >= 1 and text.count(patch["find"]) == 0:
    print(f"patch {patch['name']}: already applied to {path}")
elif text.count(patch["find"]) == 1:
    backup = path + ".tuner-orig"
    if not os.path.exists(backup):
        open(backup, "w", encoding="utf-8").write(text)
    new = text.replace(patch["find"], patch["replace"])
    open(path, "w", encoding="utf-8").write(new)
    if open(path, encoding="utf-8").read() != new:
        sys.exit(f"patch {patch['name']}: verification failed for {path}")
    print(f"patch {patch['name']}: applied to {path} (sha256 {hashlib.sha256(new.encode()).hexdigest()[:16]}, original kept as {backup})")
else:
    sys.exit(f"patch {patch['name']}: {path} does not hold the expected text; not touching it")
"""

_EMULATED_ENV_PY = (
    "import shlex, sys; from pathlib import Path; "
    "from tuner.emulator.host_root import prepare_host_root; "
    "env = prepare_host_root(Path(sys.argv[1]).resolve()); "
    "print('\\n'.join(f'export {k}={shlex.quote(v)}' for k, v in env.items()))"
)

_WAIT_PY = r"""
import sys, time, urllib.request
url, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
while time.monotonic() < deadline:
    try:
        if opener.open(url, timeout=5).status == 200:
            sys.exit(0)
    except OSError:
        pass
    time.sleep(1)
sys.exit(f"not ready: {url}")
"""


def _header(study: optuna.Study, record: TrialRecord, emulated: bool) -> list[str]:
    label = (
        " (EMULATED host: figures come from tuner's emulator, not from a GPU)" if emulated else ""
    )
    lines = [
        "#!/usr/bin/env bash",
        f"# Launch script exported by tuner on {dt.date.today().isoformat()}{label}",
        f"# study: {study.study_name}  trial: {record.number}  engine version: "
        f"{record.user_attrs.get(ENGINE_VERSION, 'unknown')}",
        _measured_line(record, emulated),
    ]
    for level in record.levels:
        lines.append(
            f"#   c={level.concurrency}: {level.output_throughput:,.0f} output tok/s, "
            f"p99 TTFT {level.p99_ttft_ms:,.0f} ms, median TPOT {level.median_tpot_ms:,.1f} ms"
        )
    spread = record.spread()
    if (
        spread is not None and spread.runs > 1
    ):  # re-measured as a close winner (tuner.study.loop._confirm)
        lines.append(f"# re-measured: {spread.text('output tok/s')}")
    if record.bound_levels:
        lines.append(
            f"# lower bounds (the client fell behind): c={', '.join(map(str, record.bound_levels))}"
        )
    validation = record.user_attrs.get(VALIDATION)
    if validation:
        lines.append(
            f"# validated: {validation.get('runs', '?')} soak runs, "
            f"{validation.get('mean_output_throughput', 0):,.0f} ± {validation.get('std_output_throughput', 0):,.0f} tok/s"
        )
    for name, digest in sorted((record.user_attrs.get(PATCH_CHECKSUMS) or {}).items()):
        lines.append(f"# patch {name}: {digest}")
    return lines


def _measured_line(record: TrialRecord, emulated: bool) -> str:
    """The figure the script stands for: the mean of its runs when it was re-measured, else its
    one run's best clean level (the study's rule: a lower bound says so)."""
    spread = record.spread()
    label = " emulated" if emulated else ""
    if spread is not None and spread.runs > 1:
        return f"# measured: {spread.mean:,.0f} output tok/s (mean of {spread.runs} runs){label}"
    figure = trial_figure(record.levels, record.metric, record.max_failed_fraction)
    bound = ", a lower bound: the client fell behind there" if figure.bound else ""
    return f"# measured: {record.value:,.0f} output tok/s (best clean level){bound}{label}"


def render_launch_script(
    space: SearchSpace,
    study: optuna.Study,
    trial_number: int | None = None,
    port: int | None = None,
) -> str:
    """The bash script for ``trial_number`` (default: the best stable, validated first)."""
    if trial_number is None:
        record = best_stable(study)
    else:
        matches = [r for r in records(study) if r.number == trial_number]
        if not matches or matches[0].state != TrialState.COMPLETE:
            raise ConfigError(f"--trial {trial_number}: no completed trial with that number")
        record = matches[0]
    emulated = bool(study.user_attrs.get(EMULATED))
    config = space.config_from_params(record.params)
    profile = load_profile(space.engine)
    placeholder = "tuner-emulator"
    port = port or space.server.port
    launch = space.render(
        config,
        command=placeholder if emulated else None,
        port=port,
        local=True if emulated else None,
        resolve=False,
    )
    lines = _header(study, record, emulated)
    lines += ["set -euo pipefail", 'PYTHON="${PYTHON:-python3}"', ""]
    lines += launch.shell_exports()
    if emulated:
        root = f"studies/{space.path.stem}-emulated.host"
        lines += [
            "",
            "# EMULATED: this starts tuner's emulator of the GLM-5 host, not SGLang on GPUs.",
            f'EMULATED_ROOT="${{EMULATED_ROOT:-{root}}}"',
            f'eval "$("$PYTHON" -c {shlex.quote(_EMULATED_ENV_PY)} "$EMULATED_ROOT")"',
        ]
    for name in sorted(launch.patches):
        patch = space.patches[name]
        spec = {
            "name": name,
            "package": patch.package,
            "file": patch.file,
            "find": patch.find,
            "replace": patch.replace,
        }
        lines += [
            "",
            f"# source patch: {name}",
            f"\"$PYTHON\" - {shlex.quote(json.dumps(spec))} <<'TUNER_PATCH'",
            _PATCH_PY.strip(),
            "TUNER_PATCH",
        ]
    if emulated:
        scale = float(study.user_attrs.get(TIME_SCALE, 1))
        interval = space.workload_for(True).stream_interval
        cmd = (
            f'"$PYTHON" -m tuner.emulator --time-scale {scale:g} --stream-interval {interval} '
            f"{launch.shell_join(launch.argv[1:])}{launch.shell_secret_args()}"
        )
    else:
        cmd = launch.shell_join(launch.argv) + launch.shell_secret_args()
    ready_timeout = space.timeouts.ready_s / float(study.user_attrs.get(TIME_SCALE, 1) or 1)
    health = f"http://127.0.0.1:{port}{profile.health_path}"
    lines += [
        "",
        "# the exact command line of the trial",
        f"{cmd} &",
        "SERVER_PID=$!",
        "trap 'kill -TERM \"$SERVER_PID\" 2>/dev/null || true' INT TERM",
        f"\"$PYTHON\" - {shlex.quote(health)} {ready_timeout:.0f} <<'TUNER_WAIT'",
        _WAIT_PY.strip(),
        "TUNER_WAIT",
        f'echo "server ready on port {port} (PID $SERVER_PID)"',
        'if [ "${TUNER_EXIT_WHEN_READY:-0}" = 1 ]; then kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; exit 0; fi',
        'wait "$SERVER_PID"',
        "",
    ]
    return "\n".join(lines)


def write_launch_script(
    space: SearchSpace,
    study: optuna.Study,
    out: Path,
    trial_number: int | None = None,
    port: int | None = None,
) -> Path:
    """Write the script (executable) and return its path."""
    text = render_launch_script(space, study, trial_number, port)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.chmod(0o755)
    return out
