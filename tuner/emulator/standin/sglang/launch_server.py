"""Stand-in for ``python -m sglang.launch_server``: starts the tuner's EMULATED GLM-5 host.

The emulator reads this package's ``srt/model_executor/model_runner.py`` (the FlashInfer
autotune gate) and ``srt/layers/communicator.py`` (the allreduce-fusion gate) at start.
"""

import sys

from tuner.emulator.server_main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
