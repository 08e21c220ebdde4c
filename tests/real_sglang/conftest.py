"""The published SGLang 0.5.9, unpacked once per session (``tests/support/sglang_wheel.py``).

The wheel is fetched with ``pip download`` and cached; a run that cannot get it fails, unless
``TUNER_TESTS_OFFLINE=1`` says there is no package index here (then these tests skip).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.sglang_wheel import (OFFLINE_VARIABLE, WheelUnavailable, fetch_wheel,
                                        unpack_wheel)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def real_sglang(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unpacked wheel's ``sglang`` package folder (read only: copy it before patching)."""
    try:
        wheel = fetch_wheel()
    except WheelUnavailable as error:
        if os.environ.get(OFFLINE_VARIABLE) == "1":
            pytest.skip(f"{OFFLINE_VARIABLE}=1: {error}")
        pytest.fail(str(error), pytrace=False)
    return unpack_wheel(wheel, tmp_path_factory.mktemp("sglang-wheel"))
