"""Nothing exposed, in a whole emulated trial over the real sshd on 127.0.0.1.

``tuner optimize`` runs with a secret in ``server.env`` (``HF_TOKEN: ${...}``) and one in
``--api-key: ${...}``. While it runs, every process's ``/proc/<pid>/cmdline`` is read again and
again (the sshd, its shells, the server, the GPU sampler are all on this machine): no secret may
appear. The server must listen on 127.0.0.1 only, receive the API key (its ``/server_info``
shows it set, and answers 401 without it: the tuner's probe and load generator send it), and be reached by the load generator through the SSH forward: no socket of the
tuner itself connects to the server's port. Afterwards no secret is in the study, ``best``,
``trials``, the export or the report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.study.conftest import REPO
from tests.support.sshd import free_port

pytestmark = pytest.mark.sshd

API_KEY = "sk-tuner-test-4c1d9e7b"
HF_TOKEN = "hf_tuner_test_93be07a2"
WORKLOAD = {"levels": [64, 256], "output_len": 64, "input_len": 256,
            "requests_per_level": {"per_concurrency": 1, "min": 64}}


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _connections_to(port: int) -> list[str]:
    """Socket inodes of established TCP connections whose remote port is ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[2].rpartition(":")[2], 16) == port:
                found.append(fields[9])
    return found


def _listeners(port: int) -> set[str]:
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].rpartition(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Watch(threading.Thread):
    """Reads every process's command line, the server's sockets and its /server_info."""

    def __init__(self, tuner_pid: int, port: int) -> None:
        super().__init__(daemon=True)
        self.tuner_pid, self.port = tuner_pid, port
        self.exposed: list[str] = []
        self.listeners: set[str] = set()
        self.forwarded = 0
        self.direct = 0
        self.api_key_set: bool | None = None
        self.refused_without_key: bool | None = None
        self.info: dict[str, object] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    text = cmdline.read_bytes()
                except OSError:
                    continue
                for secret in (API_KEY, HF_TOKEN):
                    if secret.encode() in text:
                        self.exposed.append(f"{cmdline.parent.name}: {text[:200]!r}")
            self.listeners |= _listeners(self.port)
            connections = _connections_to(self.port)
            if connections:
                mine = _socket_inodes(self.tuner_pid)
                self.direct += sum(1 for inode in connections if inode in mine)
                self.forwarded += sum(1 for inode in connections if inode not in mine)
            if self.api_key_set is None and self.listeners:
                url = f"http://127.0.0.1:{self.port}/server_info"
                try:
                    _NO_PROXY.open(url, timeout=2).close()
                    self.refused_without_key = False
                except urllib.error.HTTPError as error:
                    self.refused_without_key = error.code == 401
                except OSError:
                    pass
                request = urllib.request.Request(url, headers={"Authorization": f"Bearer {API_KEY}"})
                try:
                    with _NO_PROXY.open(request, timeout=2) as answer:
                        self.info = json.load(answer)
                        self.api_key_set = self.info.get("api_key") == "***"
                except (OSError, ValueError):
                    pass
            time.sleep(0.02)


def test_no_secret_on_any_command_line_loopback_only_through_the_forward(tmp_path: Path, sshd) -> None:
    from tuner.emulator.host_root import prepare_host_root

    env = prepare_host_root(tmp_path / "host")
    port = free_port()
    document = yaml.safe_load((REPO / "search_spaces/glm5.yaml").read_text())
    document["name"] = "exposure"
    document["host"] = {"address": "127.0.0.1", "user": sshd.user, "port": sshd.port, "key": sshd.key_path,
                        "python": sys.executable, "run_root": str(tmp_path / "runs"),
                        "forward": True}  # this sshd's 127.0.0.1 is ours: force the forward
    # the emulated host's python3 imports this checkout's emulator (it reads --config like SGLang)
    document["server"]["command"] = f"{tmp_path / 'host/bin/python3'} -m tuner.emulator --time-scale 200"
    document["server"]["port"] = port
    document["server"]["env"] = {**env, "HF_TOKEN": "${TUNER_TEST_HF_TOKEN}"}
    document["server"]["flags"]["--api-key"] = "${TUNER_TEST_API_KEY}"
    document["workload"] = {**document["workload"], **WORKLOAD}
    for key in ("emulated", "time_scale", "stream_interval"):
        document["workload"].pop(key, None)
    space = tmp_path / "exposure.yaml"
    space.write_text(yaml.safe_dump(document, sort_keys=False))
    storage = f"sqlite:///{tmp_path / 'exposure.db'}"
    tuner_env = {**os.environ, "PYTHONPATH": str(REPO), "TUNER_TEST_API_KEY": API_KEY,
                 "TUNER_TEST_HF_TOKEN": HF_TOKEN}

    def tuner(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=tmp_path, env=tuner_env,
                              capture_output=True, text=True, timeout=timeout)

    process = subprocess.Popen(
        [sys.executable, "-m", "tuner", "optimize", str(space), "--trials", "1",
         "--known-hosts", sshd.known_hosts_path, "--storage", storage, "--skip-doctor"],
        cwd=tmp_path, env=tuner_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    watch = Watch(process.pid, port)
    watch.start()
    try:
        output, _ = process.communicate(timeout=300)
    finally:
        watch.stop.set()
        watch.join(timeout=10)
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert watch.exposed == []
    assert watch.listeners == {"0100007F"}  # 127.0.0.1, never 0.0.0.0
    assert watch.api_key_set is True, watch.info  # the key reached the server (its 0600 file)
    assert watch.refused_without_key is True  # and it enforces it: the tuner's client sent it
    assert watch.forwarded > 0 and watch.direct == 0

    import optuna

    study = optuna.load_study(study_name="exposure", storage=storage)
    trial = study.trials[0]
    assert trial.state.name == "COMPLETE"
    stored = json.dumps([t.user_attrs for t in study.trials]) + json.dumps(study.user_attrs)
    assert "--api-key '${TUNER_TEST_API_KEY}'" in trial.user_attrs["command_line"]
    best = tuner("best", str(space), "--storage", storage, "--json")
    trials = tuner("trials", str(space), "--storage", storage, "--json")
    script = tmp_path / "launch.sh"
    exported = tuner("export", str(space), "--storage", storage, "--out", str(script))
    report = tmp_path / "report.html"
    reported = tuner("report", str(space), "--storage", storage, "--out", str(report))
    for done in (best, trials, exported, reported):
        assert done.returncode == 0, done.stdout + done.stderr
    assert '--api-key "${TUNER_TEST_API_KEY:?}"' in script.read_text()
    for text in (stored, output, best.stdout, trials.stdout, script.read_text(), report.read_text(),
                 (tmp_path / "exposure.db").read_bytes().decode("utf-8", "replace")):
        assert API_KEY not in text and HF_TOKEN not in text
    leftovers = list((tmp_path / "runs").rglob("secret-flags.yaml"))
    assert leftovers == []
    copied = tmp_path / "runs" / "exposure" / "trial-0000.log"  # the log fetched over SFTP
    assert "api_key='***'" in copied.read_text() and API_KEY not in copied.read_text()
