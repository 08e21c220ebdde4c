"""What the real-engine tests share: the tiny random-weight Llama, built once per session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = Path(os.environ.get("TUNER_VLLM_VENV", "/opt/tuner-venvs/vllm")) / "bin" / "python"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Llama and its tokenizer (tests/support/tiny_model.py), offline."""
    if not VLLM_PYTHON.exists():
        pytest.skip(f"{VLLM_PYTHON} is missing: run `bash .ci/install_vllm.sh` (or .ci/install)")
    out = tmp_path_factory.mktemp("tiny-llama")
    subprocess.run([str(VLLM_PYTHON), str(REPO / "tests/support/tiny_model.py"), str(out)],
                   check=True, capture_output=True, timeout=600)
    return out


def run_tuner(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m tuner ARGS``, asserted to exit 0. Past ``timeout`` the tuner gets SIGTERM, as
    from a CI timeout: it stops its server and exits (130) before the test fails, so a slow run
    leaves no vLLM behind (``subprocess.run``'s own timeout would SIGKILL the tuner alone)."""
    process = subprocess.Popen([sys.executable, "-m", "tuner", *args], cwd=cwd, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            stdout, stderr = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        raise AssertionError(f"tuner {args[0]} ran past {timeout:g} s and was stopped "
                             f"(exit {process.returncode}):\n{stdout[-3000:]}{stderr[-3000:]}") from None
    finally:
        if process.poll() is None:  # the test itself was interrupted (pytest-timeout, Ctrl-C)
            process.terminate()
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def space_on(tmp_path: Path, name: str, model: Path, port: int) -> Path:
    """``search_spaces/NAME`` copied into ``tmp_path`` with the tiny model, ``port``, and the
    vLLM cache and run root under ``tmp_path``."""
    document = yaml.safe_load((REPO / "search_spaces" / name).read_text())
    document["server"]["flags"]["--model"] = str(model)
    document["server"]["port"] = port
    document["server"]["env"]["VLLM_CACHE_ROOT"] = str(tmp_path / "vllm-cache")
    document["host"]["run_root"] = str(tmp_path / "runs")
    space = tmp_path / name
    space.write_text(yaml.safe_dump(document, sort_keys=False))
    return space
