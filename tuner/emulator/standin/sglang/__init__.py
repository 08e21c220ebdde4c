"""Stand-in ``sglang`` package of the tuner's EMULATED GLM-5 host (not SGLang).

It sits only on the emulated server's ``PYTHONPATH`` (``tuner.emulator.host_root``), so the
tuner's patch step finds its source files by asking that Python where ``sglang`` lives, as on a
real host. ``python -m sglang.launch_server`` starts ``tuner.emulator``. Its version is the
emulated host's (``$TUNER_EMULATOR_SGLANG_VERSION``, default 0.5.9: ``tuner.emulator.versions``).
"""

from tuner.emulator.versions import installed as _installed

__version__ = _installed().version
