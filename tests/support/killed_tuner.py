"""A tuner process that is SIGKILLed at a chosen moment (run as a script by the tests).

Usage: ``python killed_tuner.py SPEC_JSON ACTION``. SPEC_JSON holds ``host`` (HostSpec fields)
and, per action, ``patch``, ``python``, ``env``, ``journal_dir`` or ``argv``/``run_dir``.

- ``patch:before-write`` / ``patch:after-write`` / ``patch:applied``: apply the patch and kill
  itself just before the patched file is written, just after, or once all is done.
- ``serve``: start a server, print its handle as JSON, then wait to be killed by the test.
- ``claim``: claim the host's run root for study ``study``, then kill itself (the claim stays).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from tuner.host import HostClaim, HostSpec, open_host
from tuner.patches import PatchManager, PatchSpec


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def patch(spec: dict, moment: str) -> None:
    host = open_host(HostSpec(**spec["host"]))
    target_patch = PatchSpec(**spec["patch"])
    manager = PatchManager(
        host, python=spec["python"], env=spec["env"], journal_dir=spec["journal_dir"]
    )
    target = manager.locate(target_patch)
    write_file = host.write_file

    def write_then_maybe_die(path: str, data: bytes) -> None:
        if path == target and moment == "before-write":
            _die()
        write_file(path, data)
        if path == target and moment == "after-write":
            _die()

    host.write_file = write_then_maybe_die  # type: ignore[method-assign]
    manager.apply(target_patch)
    _die()


def serve(spec: dict) -> None:
    host = open_host(HostSpec(**spec["host"]))
    handle = host.start_server(spec["argv"], env={}, run_dir=spec["run_dir"])
    print(handle.to_json(), flush=True)
    time.sleep(120)  # the test kills this process long before


def claim(spec: dict) -> None:
    host = open_host(HostSpec(**spec["host"]))
    HostClaim(host, host.run_root, study=spec["study"]).acquire()
    _die()


def main() -> None:
    spec, action = json.loads(sys.argv[1]), sys.argv[2]
    if action == "serve":
        serve(spec)
    elif action == "claim":
        claim(spec)
    else:
        patch(spec, action.removeprefix("patch:"))


if __name__ == "__main__":
    main()
