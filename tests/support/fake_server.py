"""A small stand-in server for the host-layer tests (run as a script, never imported by tests).

It records its argv and chosen environment variables to a JSON file, optionally listens on a TCP
port, optionally starts a child in its own process group, optionally ignores SIGTERM, prints
numbered lines (with multi-byte characters) to its log, and exits cleanly when a stop file appears.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", help="write argv and env here (JSON)")
    parser.add_argument("--port", type=int)
    parser.add_argument("--child", action="store_true", help="start a child process")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--lines", type=int, default=0, help="print this many lines, 0.05 s apart")
    parser.add_argument("--stop-file", help="exit cleanly once this file exists")
    parser.add_argument("--env-names", default="", help="comma-separated env vars to record")
    args, _unknown = parser.parse_known_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.record:
        env = {name: os.environ.get(name) for name in args.env_names.split(",") if name}
        with open(args.record + ".tmp", "w") as stream:
            json.dump(
                {"argv": sys.argv, "env": env, "pid": os.getpid(), "pgid": os.getpgid(0)}, stream
            )
        os.replace(args.record + ".tmp", args.record)
    listener = None
    if args.port:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", args.port))
        listener.listen()
    if args.child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("fake server ready", flush=True)
    for number in range(args.lines):
        print(f"line {number} é€", flush=True)
        time.sleep(0.05)
    while True:
        if args.stop_file and os.path.exists(args.stop_file):
            print("stop file seen: exiting cleanly", flush=True)
            return
        time.sleep(0.05)


if __name__ == "__main__":
    main()
