"""Lay out an emulated GLM-5 host in a folder: its ``sglang``, its ``nvidia-smi``, its Python.

:func:`prepare_host_root` makes, under ``root``:

- ``site/sglang``: a copy of the stand-in package (made once; an existing copy is never
  overwritten, so a patched file survives between trials, as on a real host);
- ``bin/nvidia-smi``: the stand-in ``nvidia-smi``;
- ``bin/python3`` and ``bin/python``: run the Python the tuner runs on, so ``python3`` on the
  emulated host (locally or over SSH, whatever the login shell's ``PATH``) imports the
  emulator and finds the stand-in ``sglang``;
- ``state/``: where a running emulator publishes its GPU load.

It returns the environment the emulated server and every command on the emulated host need:
``PYTHONPATH`` (only ``site``: the stand-in is never installed where it could shadow a real
``sglang``), ``PATH`` (``bin`` first) and ``TUNER_EMULATOR_STATE``. The tuner's patch step then
finds the gate file by running ``python3 -c "import sglang, os; print(os.path.dirname(
sglang.__file__))"`` with that environment, exactly as on a real host.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
from pathlib import Path

from tuner.emulator.gpu_state import STATE_ENV
from tuner.emulator.source_files import STANDIN_PACKAGE

__all__ = ["NVIDIA_SMI", "prepare_host_root"]

NVIDIA_SMI = Path(__file__).parent / "bin" / "nvidia-smi"


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _python_wrapper() -> str:
    """A ``python3`` that runs this interpreter with the tuner importable."""
    tuner_parent = str(Path(__file__).resolve().parents[2])
    return (
        "#!/bin/sh\n"
        "# The emulated host's Python: the interpreter the tuner runs on (tuner.emulator).\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{tuner_parent}" '
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )


def prepare_host_root(root: Path) -> dict[str, str]:
    """Create (or reuse) an emulated host under ``root``; the environment it needs.

    Args:
        root: the emulated host's folder (created if missing).

    Returns:
        ``{"PYTHONPATH": ..., "PATH": ..., "TUNER_EMULATOR_STATE": ...}``.
    """
    root = Path(root).resolve()
    site, bin_dir, state = root / "site", root / "bin", root / "state"
    for directory in (site, bin_dir, state):
        directory.mkdir(parents=True, exist_ok=True)
    package = site / "sglang"
    if not package.exists():
        staging = site / ".sglang.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(
            STANDIN_PACKAGE, staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        staging.rename(package)
    # Its version line follows the emulated host's (never a patched file: patches change srt/).
    shutil.copyfile(STANDIN_PACKAGE / "__init__.py", package / "__init__.py")
    shutil.copyfile(NVIDIA_SMI, bin_dir / "nvidia-smi")
    (bin_dir / "nvidia-smi").chmod(0o755)
    wrapper = _python_wrapper()
    for name in ("python3", "python"):
        _executable(bin_dir / name, wrapper)
    path = os.environ.get("PATH", os.defpath)
    return {
        "PYTHONPATH": str(site),
        "PATH": f"{bin_dir}:{path}",
        STATE_ENV: str(state),
    }
