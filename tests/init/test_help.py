"""The engine's flags read from its --help: argparse's format (SGLang, vLLM) and click's
(transformers serve, its recorded --help)."""

from __future__ import annotations

from pathlib import Path

from tuner.init._help import FlagInfo, parse_help

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

ARGPARSE = """usage: launch_server [-h] [--trust-remote-code] [--tp-size TP_SIZE]
                     [--attention-backend {triton,torch_native,
                     fa3,flashinfer}]
options:
  --trust-remote-code   Whether or not to allow custom models.
  --tp-size TP_SIZE, --tensor-parallel-size TP_SIZE
                        The tensor parallelism size.
  --enable-chunked-prefill, --no-enable-chunked-prefill
                        Chunked prefill.
"""


def test_argparse_help() -> None:
    flags = parse_help(ARGPARSE)
    assert flags.flags["--trust-remote-code"] == FlagInfo(False)
    assert flags.flags["--tp-size"] == FlagInfo(True)
    assert flags.flags["--tensor-parallel-size"] == FlagInfo(True)
    assert flags.choices("--attention-backend") == ("triton", "torch_native", "fa3", "flashinfer")
    assert flags.flags["--no-enable-chunked-prefill"] == FlagInfo(False)
    assert flags.suggestion("--tp-sise") == "--tp-size"
    assert flags.known("--attention")  # a unique prefix, as argparse accepts
    assert not flags.known("--t")


def test_click_help_of_transformers_serve() -> None:
    flags = parse_help((FIXTURES / "transformers" / "serve-help.txt").read_text())
    assert flags.flags["--continuous-batching"] == FlagInfo(False)
    assert flags.flags["--no-cb-use-cuda-graph"] == FlagInfo(False)
    assert flags.flags["--cb-num-blocks"] == FlagInfo(True)
    assert flags.flags["--attn-implementation"] == FlagInfo(True)
    assert flags.choices("--reasoning") == ("on", "off", "auto")
    assert "--help" not in flags.flags
