"""A server command that looks at what it was started with, then dies at once (run as a script).

``stat_server.py SEEN.json --config FILE [more flags]``: at its very start it records the
permission bits of the ``--config`` file, of the folder holding it (the run folder), of that
folder's parent, and of its own stdout (the server log), as they are while it runs, and the
process umask. Then it prints the config file's text to its log, as SGLang prints its
``server_args`` (keys included), and exits 1: a start that fails.
"""

from __future__ import annotations

import json
import os
import stat
import sys


def _mode(path: str) -> str:
    return f"{stat.S_IMODE(os.stat(path).st_mode):04o}"


def main() -> int:
    seen_path, argv = sys.argv[1], sys.argv[2:]
    config = argv[argv.index("--config") + 1]
    run_dir = os.path.dirname(config)
    umask = os.umask(0)
    os.umask(umask)
    seen = {"config": _mode(config), "run_dir": _mode(run_dir),
            "run_dir_parent": _mode(os.path.dirname(run_dir)),
            "log": f"{stat.S_IMODE(os.fstat(1).st_mode):04o}", "umask": f"{umask:04o}"}
    with open(seen_path + ".tmp", "w") as stream:
        json.dump(seen, stream)
    os.replace(seen_path + ".tmp", seen_path)
    with open(config) as stream:
        print(f"server_args: {' '.join(stream.read().split())}", flush=True)
    print("Traceback (most recent call last):", flush=True)
    print("RuntimeError: this server dies at start", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
