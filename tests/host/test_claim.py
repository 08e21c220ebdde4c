"""One tuner at a time per host: the claim file, locally and over a real sshd on 127.0.0.1.

Every test takes the parametrized ``host`` fixture (LocalHost and SshHost on a fresh run root that
does not exist yet). The sshd runs on this machine, so the claim file is also read and aged
directly through the file system.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.support.host import host_fields, run_killed_tuner, wait_until
from tuner import doctor
from tuner.host import Host, HostBusy, HostClaim, read_claim

# A claim written by a tuner on another machine: its owner can never be judged dead from here.
ELSEWHERE = {"owner": {"host": "another-machine", "pid": 4242, "starttime": "1"}, "study": "far",
             "taken_at": 0.0, "token": "0123456789abcdef"}


def _claim_file(host: Host) -> Path:
    return Path(host.run_root) / "tuner.claim"


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _write_foreign(host: Host, age_s: float) -> Path:
    path = _claim_file(host)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ELSEWHERE) + "\n")
    _age(path, age_s)
    return path


def test_a_second_claim_is_refused_naming_the_owner(host: Host) -> None:
    assert not Path(host.run_root).exists()  # created by the claim
    assert read_claim(host, host.run_root) is None
    with HostClaim(host, host.run_root, study="first") as first:
        claim = _claim_file(host)
        before = claim.read_bytes()
        assert json.loads(before)["owner"]["pid"] == os.getpid()
        with pytest.raises(HostBusy) as refused:
            HostClaim(host, host.run_root, study="second").acquire()
        message = str(refused.value)
        assert "\n" not in message
        assert f"in use by tuner PID {os.getpid()} on " in message and "(study first)" in message
        assert "fix: run one tuner per host" in message
        assert claim.read_bytes() == before  # the refused one changed nothing
        assert first.taken_over is None
    assert not claim.exists()
    assert os.listdir(host.run_root) == []


def test_a_run_root_with_spaces_and_quotes(host: Host, tmp_path: Path) -> None:
    root = tmp_path / "it's a \"root\" $HOME" / "runs"
    with HostClaim(host, str(root) + "/", study="odd; name") as claim:
        assert (root / "tuner.claim").is_file() and claim.path == f"{root}/tuner.claim"
        with pytest.raises(HostBusy, match="study odd; name"):
            HostClaim(host, str(root), study="second").acquire()
    assert os.listdir(root) == []


def test_a_claim_whose_tuner_died_is_taken_over(host: Host, request: pytest.FixtureRequest) -> None:
    ended = run_killed_tuner({"host": host_fields(host, request), "study": "killed"}, "claim")
    assert ended.returncode == -signal.SIGKILL, ended.stderr.decode()[-2000:]
    left = json.loads(_claim_file(host).read_text())
    dead_pid = left["owner"]["pid"]
    assert left["study"] == "killed" and dead_pid != os.getpid()

    held = read_claim(host, host.run_root)
    assert held is not None and held.owner_gone and held.age_s < 60  # fresh, but its tuner is gone
    check = doctor.check_host_claim(host, host.run_root)
    assert check.ok and "gone" in check.detail and "taken over" in check.detail
    with HostClaim(host, host.run_root, study="next") as claim:
        assert claim.taken_over is not None and claim.taken_over.owner["pid"] == dead_pid
        line = claim.describe_takeover()
        assert f"tuner PID {dead_pid}" in line and "(study killed)" in line and "gone" in line
        assert json.loads(_claim_file(host).read_text())["study"] == "next"
    assert not _claim_file(host).exists()


def test_a_claim_not_refreshed_for_stale_after_s_is_taken_over(host: Host) -> None:
    path = _write_foreign(host, age_s=100)
    with pytest.raises(HostBusy) as refused:  # another machine's tuner, refreshed 100 s ago
        HostClaim(host, host.run_root, study="mine", stale_after_s=300).acquire()
    assert "tuner PID 4242 on another-machine (study far)" in str(refused.value)
    refreshed = re.search(r"refreshed (\d+) s ago", str(refused.value))  # 100 s + this test's time
    assert refreshed is not None and 100 <= int(refreshed.group(1)) < 160, str(refused.value)
    check = doctor.check_host_claim(host, host.run_root)
    assert not check.ok and "tuner PID 4242" in check.detail and check.fix

    _age(path, 400)
    check = doctor.check_host_claim(host, host.run_root)
    assert check.ok and "taken over" in check.detail
    assert json.loads(path.read_text()) == ELSEWHERE  # doctor reads, never claims
    with HostClaim(host, host.run_root, study="mine", stale_after_s=300) as claim:
        assert claim.taken_over is not None and claim.taken_over.age_s >= 399
        assert "not refreshed for 4" in claim.describe_takeover()
        assert json.loads(path.read_text())["study"] == "mine"
        assert doctor.check_host_claim(host, host.run_root).detail == "claimed by this tuner"
    assert not path.exists()


def test_release_removes_only_our_own_claim(host: Host) -> None:
    claim = HostClaim(host, host.run_root, study="mine")
    claim.acquire()
    path = _claim_file(host)
    assert json.loads(path.read_text())["token"] == claim.token
    replacement = json.dumps(ELSEWHERE) + "\n"  # another tuner took it over meanwhile
    path.write_text(replacement)
    claim.release()
    assert path.read_text() == replacement
    assert claim.lost

    path.unlink()
    with HostClaim(host, host.run_root, study="mine") as again:
        assert path.exists()
    assert not path.exists() and not again.lost


def test_the_refresher_renews_the_claim_and_stops_at_release(host: Host) -> None:
    path = _claim_file(host)
    with HostClaim(host, host.run_root, study="mine", refresh_s=0.2, stale_after_s=60):
        _age(path, 100)
        assert wait_until(lambda: time.time() - path.stat().st_mtime < 10, timeout=15)
        _age(path, 100)
        assert wait_until(lambda: time.time() - path.stat().st_mtime < 10, timeout=15)
        assert read_claim(host, host.run_root).age_s < 10
    assert not path.exists()
    time.sleep(1.0)  # a refresh cut short by the release never re-creates the file
    assert not path.exists()


def _race(hosts: list[Host], run_root: str) -> tuple[list[HostClaim], list[str]]:
    """Two tuners claiming ``run_root`` at the same instant, one on each host handle."""
    start = threading.Barrier(len(hosts))
    won: list[HostClaim] = []
    refused: list[str] = []

    def contend(index: int) -> None:
        claim = HostClaim(hosts[index], run_root, study=f"racer-{index}")
        start.wait()
        try:
            claim.acquire()
        except HostBusy as error:
            refused.append(str(error))
        else:
            won.append(claim)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(len(hosts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return won, refused


@pytest.mark.parametrize("left", ["nothing", "stale"])
def test_two_claims_racing_exactly_one_wins(host: Host, left: str) -> None:
    for round_ in range(3):
        if left == "stale":
            _write_foreign(host, age_s=1000)
        other = host.sibling()  # its own connection, as another tuner's
        try:
            won, refused = _race([host, other], host.run_root)
            try:
                assert len(won) == 1 and len(refused) == 1, (round_, won, refused)
                winner = won[0]
                assert f"(study {winner.study})" in refused[0]
                assert json.loads(_claim_file(host).read_text())["token"] == winner.token
                if left == "stale":
                    assert winner.taken_over is not None and winner.taken_over.study == "far"
            finally:
                for claim in won:
                    claim.release()
        finally:
            if other is not host:
                other.close()
        assert not _claim_file(host).exists()
        assert os.listdir(host.run_root) == []  # no temporary file left behind
