"""The published SGLang wheel the tests check patches and flags against, fetched once and cached.

``pip download --no-deps sglang==0.5.9`` (about 5 MB of pure Python) into
``$TUNER_TEST_CACHE/sglang-0.5.9/`` (default ``~/.cache/tuner-tests``); later runs use the cached
file. ``.ci/install`` fetches it (``python3 tests/support/sglang_wheel.py``), so CI has it before
the tests start. A test that cannot get it fails, naming the command; it is skipped only when
``TUNER_TESTS_OFFLINE=1`` says that this machine has no package index.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

__all__ = ["BENCH_MODULE", "OFFLINE_VARIABLE", "bench_tool", "SGLANG_VERSION", "WheelUnavailable", "cache_dir", "fetch_wheel",
           "unpack_wheel"]

SGLANG_VERSION = "0.5.9"
OFFLINE_VARIABLE = "TUNER_TESTS_OFFLINE"


class WheelUnavailable(RuntimeError):
    """The wheel is not cached and ``pip download`` could not fetch it."""


def cache_dir() -> Path:
    """Where the wheel is kept between runs."""
    base = os.environ.get("TUNER_TEST_CACHE") or str(Path.home() / ".cache" / "tuner-tests")
    return Path(base) / f"sglang-{SGLANG_VERSION}"


def fetch_wheel() -> Path:
    """The cached wheel, downloaded first if it is not there.

    Raises:
        WheelUnavailable: pip could not download it (its last lines are in the message).
    """
    folder = cache_dir()
    pattern = f"sglang-{SGLANG_VERSION}-*.whl"
    found = sorted(folder.glob(pattern))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               f"sglang=={SGLANG_VERSION}", "-d", str(folder)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                            stdin=subprocess.DEVNULL, check=False)
    found = sorted(folder.glob(pattern))
    if result.returncode != 0 or not found:
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise WheelUnavailable(
            f"cannot fetch sglang {SGLANG_VERSION}: `{' '.join(command)}` exited "
            f"{result.returncode} ({tail}); run it with network access, or set "
            f"{OFFLINE_VARIABLE}=1 to skip the tests against the real SGLang"
        )
    return found[0]


def unpack_wheel(wheel: Path, destination: Path) -> Path:
    """Unpack ``wheel`` into ``destination`` (a folder for PYTHONPATH) and return the
    ``sglang`` package folder in it."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(destination)
    package = destination / "sglang"
    if not (package / "srt").is_dir():
        raise WheelUnavailable(f"{wheel}: no sglang/srt inside: the download is not SGLang")
    return package


if __name__ == "__main__":
    print(fetch_wheel())


BENCH_MODULE = "sglang_bench_serving_059"


def bench_tool(destination: Path) -> Path:
    """The published 0.5.9 ``bench_serving.py`` as a module of its own (:data:`BENCH_MODULE`) in
    ``destination``, to run with the vllm venv's Python (it has transformers for the tokenizer):
    ``sglang/__init__`` would import the GPU stack. Its ``from datasets import load_dataset``
    serves only dataset files, not the ``random-ids`` prompts the tests use, and that package is
    not in the venv: a module that fails if it is ever called stands in for it. Put
    ``destination`` on the tool's ``PYTHONPATH``."""
    package = unpack_wheel(fetch_wheel(), destination / "wheel")
    tool = destination / "tool"
    tool.mkdir(parents=True, exist_ok=True)
    (tool / f"{BENCH_MODULE}.py").write_bytes((package / "bench_serving.py").read_bytes())
    (tool / "datasets.py").write_text(
        "def load_dataset(*args, **kwargs):\n    raise RuntimeError('no datasets here')\n")
    return tool
