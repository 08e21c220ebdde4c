"""A server command that records the argv it received, then becomes the emulator.

Used as a search space's ``server.command`` to check that values reach the server exactly as
written (shell metacharacters included). The file to write is ``$RECORD_ARGV_FILE``.
"""

from __future__ import annotations

import json
import os
import sys

with open(os.environ["RECORD_ARGV_FILE"], "w", encoding="utf-8") as record:
    json.dump(sys.argv[1:], record)
os.execv(sys.executable, [sys.executable, "-m", "tuner.emulator", *sys.argv[1:]])
