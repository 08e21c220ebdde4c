"""The rule for the published wheel: cached after the first fetch, and a fetch that fails is an
error naming the command and the way to skip (``TUNER_TESTS_OFFLINE=1``), never a silent skip."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.real_sglang.conftest import REPO
from tests.support.sglang_wheel import WheelUnavailable, cache_dir, fetch_wheel

NO_INDEX = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0",
            "PIP_TIMEOUT": "2", "PIP_NO_CACHE_DIR": "1", "PIP_FIND_LINKS": ""}


def test_a_cached_wheel_is_used_without_pip(real_sglang: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    for name, value in NO_INDEX.items():  # no index reachable: only the cache can answer
        monkeypatch.setenv(name, value)
    wheel = fetch_wheel()
    assert wheel.parent == cache_dir() and wheel.name.startswith("sglang-0.5.9-")


def test_no_wheel_and_no_index_fails_naming_the_fix(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNER_TEST_CACHE", str(tmp_path / "cache"))
    for name, value in NO_INDEX.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(WheelUnavailable) as error:
        fetch_wheel()
    assert "pip download --no-deps --only-binary=:all: sglang==0.5.9" in str(error.value)
    assert "TUNER_TESTS_OFFLINE=1" in str(error.value)


@pytest.mark.parametrize(("offline", "outcome"), [("", "1 error"), ("1", "1 skipped")])
def test_the_tests_fail_unless_told_offline(tmp_path: Path, offline: str, outcome: str) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(textwrap.dedent("""
        def test_uses_the_wheel(real_sglang):
            assert (real_sglang / "srt").is_dir()
    """))
    (tmp_path / "conftest.py").write_text("from tests.real_sglang.conftest import real_sglang\n")
    env = {**NO_INDEX, "TUNER_TEST_CACHE": str(tmp_path / "cache"), "TUNER_TESTS_OFFLINE": offline,
           "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "--rootdir", str(tmp_path), str(probe)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300, check=False)
    assert outcome in result.stdout, result.stdout + result.stderr
