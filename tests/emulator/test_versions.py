"""The emulated host's installed SGLang version (``$TUNER_EMULATOR_SGLANG_VERSION``): the stand-in's
``__version__``, the server's flags and the model follow it (tuner/emulator/versions.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tuner.emulator.host_root import prepare_host_root
from tuner.emulator.perf_model import predict_throughput
from tuner.emulator.versions import VERSION_ENV

N_ON = {"tp_size": 8, "quantization": "modelopt_fp4", "moe_runner_backend": "flashinfer_cutlass",
        "mem_fraction_static": 0.92}


def _on_host(env: dict[str, str], version: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), env={**os.environ, **env, VERSION_ENV: version}, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, check=False)


def test_the_upgrade_renames_a_flag_and_the_host_reports_its_version(tmp_path: Path) -> None:
    env = prepare_host_root(tmp_path / "host")
    for version, known, gone in (("0.5.9", "--cuda-graph-max-bs", "--cuda-graph-max-batch-size"),
                                 ("0.5.10", "--cuda-graph-max-batch-size", "--cuda-graph-max-bs ")):
        said = _on_host(env, version, "python3", "-c", "import sglang; print(sglang.__version__)")
        assert said.stdout.strip() == version, said.stderr
        shown = _on_host(env, version, "python3", "-m", "sglang.launch_server", "--help")
        assert known in shown.stdout and gone not in shown.stdout
    refused = _on_host(env, "0.5.10", "python3", "-m", "sglang.launch_server", "--model-path", "m",
                       "--cuda-graph-max-bs", "64")  # argparse stops it before anything starts
    assert refused.returncode == 2 and "unrecognized arguments: --cuda-graph-max-bs" in refused.stderr


def test_the_upgrade_changes_the_radix_cache_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    def gain() -> float:
        return predict_throughput({**N_ON, "disable_radix_cache": True}, False, False, 512) / \
            predict_throughput(N_ON, False, False, 512)

    assert gain() == pytest.approx(1.01, abs=0.01)
    monkeypatch.setenv(VERSION_ENV, "0.5.10")
    assert gain() == pytest.approx(0.88, abs=0.02)
    monkeypatch.setenv(VERSION_ENV, "9.9")
    with pytest.raises(SystemExit, match="the emulator knows SGLang 0.5.9, 0.5.10"):
        gain()
