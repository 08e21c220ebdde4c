"""``python -m tuner.emulator [SGLang 0.5.9 launch_server flags] [--time-scale K]``."""

from __future__ import annotations

import sys

from tuner.emulator.server_main import main

if __name__ == "__main__":
    sys.exit(main())
