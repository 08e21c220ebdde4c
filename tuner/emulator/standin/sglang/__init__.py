"""Stand-in ``sglang`` package of the tuner's EMULATED GLM-5 host (not SGLang).

It sits only on the emulated server's ``PYTHONPATH`` (``tuner.emulator.host_root``), so the
tuner's patch step finds its source files by asking that Python where ``sglang`` lives, as on a
real host. ``python -m sglang.launch_server`` starts ``tuner.emulator``. Its version is the
emulated host's, ``$TUNER_EMULATOR_SGLANG_VERSION`` (default 0.5.9; ``tuner.emulator.versions``,
which this package does not import: the host's Python may not have the tuner on its path).
"""

import os as _os

__version__ = _os.environ.get("TUNER_EMULATOR_SGLANG_VERSION", "").strip() or "0.5.9"
