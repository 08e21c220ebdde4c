"""A crash's detail names the error that caused it (the traceback's last line), not SGLang's
generic ``Scheduler hit an exception`` line: through the real watcher, locally and over sshd."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.host import PYTHON
from tests.support.sshd import free_port
from tuner.crash_cause import crash_cause
from tuner.engines import load_profile
from tuner.errors import ServerFailure
from tuner.host import Host
from tuner.lifecycle import ServerSession

CAUSE = "AttributeError: 'PrefillMetadata' object has no attribute 'topk_indices'"
# What a crashing SGLang 0.5.9 scheduler writes: the generic line with the traceback's start,
# the frames and the exception in a later write, then the parent's SIGQUIT line. The later write
# comes 1.5 s after the first here, as it can on a busy machine (seen at 0.3 s apart with two
# test processes and a busy core: the watcher had read only the first line).
CRASHING_SERVER = textwrap.dedent(f'''
    import sys, time
    print("[2026-01-01 00:00:00 TP0] Load weight end.", flush=True)
    print("[2026-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call "
          "last):", flush=True)
    time.sleep(1.5)
    print(\'  File "/sgl/srt/managers/scheduler.py", line 2950, in run_scheduler_process\\n\'
          "    scheduler.event_loop_overlap()\\n"
          \'  File "/sgl/srt/layers/attention/nsa_backend.py", line 812, in forward_extend\\n\'
          "    metadata.topk_indices\\n"
          {CAUSE!r} "\\n", flush=True)
    print("[2026-01-01 00:00:01] Received sigquit from a child process. It usually means the "
          "child failed.", flush=True)
    sys.exit(1)
''')


def test_the_cause_through_the_watcher(host: Host, tmp_path: Path, run_root: str) -> None:
    script = tmp_path / "crashing_server.py"
    script.write_text(CRASHING_SERVER)
    session = ServerSession(host, load_profile("sglang"), [PYTHON, str(script)], {}, free_port(),
                            f"{run_root}/crash", stop_grace_s=2.0, poll_s=0.1)
    with session:  # starts the server (a second start() would run a second one)
        with pytest.raises(ServerFailure) as failed:
            session.wait_ready(60)
    assert failed.value.reason == "startup-crash"
    assert failed.value.detail == CAUSE
    assert "Scheduler hit an exception" in failed.value.excerpt  # the log excerpt keeps it all


def test_a_fatal_line_written_just_before_the_exit_still_names_the_cause(run_root: str, tmp_path: Path) -> None:
    # A busy machine can delay the watcher between its log read and its process check: the
    # server writes its traceback and exits in between. Here the real local host's process check
    # waits 1.5 s first, so that this always happens; the cause must still be the fatal line's.
    from tuner.host import HostSpec, open_host

    class SlowProcessCheck:
        def __init__(self, host: Host) -> None:
            self._host = host

        def __getattr__(self, name: str):
            return getattr(self._host, name)

        def is_running(self, handle) -> bool:
            time.sleep(1.5)
            return self._host.is_running(handle)

    script = tmp_path / "crashing_server.py"
    script.write_text("import time\ntime.sleep(0.5)\n" + CRASHING_SERVER)
    real = open_host(HostSpec(run_root=run_root, python=PYTHON))
    try:
        session = ServerSession(SlowProcessCheck(real), load_profile("sglang"), [PYTHON, str(script)],
                                {}, free_port(), f"{run_root}/crash", stop_grace_s=2.0, poll_s=0.1)
        with session:  # starts the server (a second start() would run a second one)
            with pytest.raises(ServerFailure) as failed:
                session.wait_ready(60)
    finally:
        real.close()
    assert failed.value.reason == "startup-crash"
    assert failed.value.detail == CAUSE


@pytest.mark.parametrize(("fatal", "after", "cause"), [
    ("Scheduler hit an exception: Traceback (most recent call last):",
     ['  File "a.py", line 1, in f', "    g()", "RuntimeError: CUDA error: an illegal memory "
      "access was encountered", "", "[2026] Received sigquit"],
     "RuntimeError: CUDA error: an illegal memory access was encountered"),
    ("Scheduler hit an exception: ValueError: boom", ["[2026] next record"], "ValueError: boom"),
    ("Scheduler hit an exception: Traceback (most recent call last):",  # a chained traceback
     ['  File "a.py", line 1', "KeyError: 'x'", "",
      "During handling of the above exception, another exception occurred:", "",
      "Traceback (most recent call last):", '  File "b.py", line 2',
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "[2026] next"],
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
    ("Scheduler hit an exception: Traceback (most recent call last):", [], None),  # not yet
    ("SIGQUIT received", ["[2026] other line"], None),
])
def test_crash_cause(fatal: str, after: list[str], cause: str | None) -> None:
    assert crash_cause(fatal, after) == cause
