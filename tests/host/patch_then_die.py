"""Apply a patch in a process that SIGKILLs itself at a chosen moment (a tuner killed mid-run).

Usage: python patch_then_die.py SPEC_JSON MOMENT, where SPEC_JSON holds the host spec fields, the
patch fields, ``journal_dir`` and ``env``, and MOMENT is ``before-write`` (journal written, file
not yet), ``after-write`` (file written, journal not yet final) or ``applied`` (all done).
"""

from __future__ import annotations

import json
import os
import signal
import sys

from tuner.host import HostSpec, open_host
from tuner.patches import PatchManager, PatchSpec


def main() -> None:
    spec = json.loads(sys.argv[1])
    moment = sys.argv[2]
    host = open_host(HostSpec(**spec["host"]))
    patch = PatchSpec(**spec["patch"])
    manager = PatchManager(
        host, python=spec["python"], env=spec["env"], journal_dir=spec["journal_dir"]
    )
    target = manager.locate(patch)
    write_file = host.write_file

    def write_then_maybe_die(path: str, data: bytes) -> None:
        if path == target and moment == "before-write":
            os.kill(os.getpid(), signal.SIGKILL)
        write_file(path, data)
        if path == target and moment == "after-write":
            os.kill(os.getpid(), signal.SIGKILL)

    host.write_file = write_then_maybe_die  # type: ignore[method-assign]
    manager.apply(patch)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
