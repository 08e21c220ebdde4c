"""What a version change breaks, as a pure function: unknown flags, values outside a flag's
choices, patches whose find-text is gone (tuner/recheck/_breaks.py)."""

from __future__ import annotations

from tuner.recheck import (
    BreakKind,
    EngineInterface,
    StoredLaunch,
    launch_flags,
    parse_help,
    version_breaks,
)

HELP = """usage: launch_server [-h] --model-path MODEL_PATH [--attention-backend {triton,flashinfer}]
  --cuda-graph-max-batch-size CUDA_GRAPH_MAX_BATCH_SIZE
  --cuda-graph-bs CUDA_GRAPH_BS [CUDA_GRAPH_BS ...]
  --disable-radix-cache
  --mem-fraction-static MEM_FRACTION_STATIC
"""


def test_help_gives_flags_and_choices() -> None:
    engine = parse_help(HELP, "0.5.10")
    assert "--cuda-graph-max-batch-size" in engine.flags and "--model-path" in engine.flags
    assert engine.choices["--attention-backend"] == ("triton", "flashinfer")
    assert "--mem-fraction-static" not in engine.choices


def test_launch_flags_pairs_values_and_switches() -> None:
    argv = ["python3", "-m", "sglang.launch_server", "--tp-size", "8", "--disable-radix-cache",
            "--chunked-prefill-size", "-1", "--x=1"]
    assert launch_flags(argv) == (("--tp-size", "8"), ("--disable-radix-cache", None),
                                  ("--chunked-prefill-size", "-1"), ("--x", "1"))


def test_a_renamed_flag_a_lost_choice_and_a_gone_patch_are_each_one_break() -> None:
    engine = parse_help(HELP, "0.5.10")
    launches = [
        StoredLaunch(3, (("--cuda-graph-max-bs", "64"), ("--attention-backend", "fa3")), ("gate",)),
        StoredLaunch(7, (("--cuda-graph-max-bs", "128"), ("--attention-backend", "triton"))),
        StoredLaunch(9, (("--mem-frac", "0.9"), ("--disable-radix-cache", None))),  # a unique prefix: fine
    ]
    found = version_breaks(launches, engine, {"gate": "# \"flashinfer_cutlass\","},
                           {"gate": "backends = [\n    \"flashinfer_trtllm\",\n]\n"})
    by_kind = {b.kind: b for b in found}
    assert set(by_kind) == {BreakKind.UNKNOWN_FLAG, BreakKind.NOT_A_CHOICE, BreakKind.PATCH_GONE}
    unknown = by_kind[BreakKind.UNKNOWN_FLAG]
    assert (unknown.what, unknown.trials) == ("--cuda-graph-max-bs", (3, 7))
    assert "--cuda-graph-max-batch-size" in unknown.detail  # the rename's likely new name
    assert by_kind[BreakKind.NOT_A_CHOICE].what == "--attention-backend fa3"
    assert by_kind[BreakKind.NOT_A_CHOICE].trials == (3,)
    assert by_kind[BreakKind.PATCH_GONE].trials == (3,)
    assert "find-text is not in the file" in by_kind[BreakKind.PATCH_GONE].detail


def test_nothing_breaks_when_the_engine_takes_every_stored_launch() -> None:
    engine = EngineInterface("0.5.9", frozenset({"--tp-size", "--cuda-graph-max-bs", "--cuda-graph-bs"}))
    launches = [StoredLaunch(0, (("--tp-size", "8"),), ("gate",))]
    assert version_breaks(launches, engine, {"gate": "FIND"}, {"gate": "a\nFIND\nb"}) == []
    # an ambiguous prefix is a break (argparse refuses it), as is a find-text found twice
    found = version_breaks([StoredLaunch(1, (("--cuda-graph", "1"),), ("gate",))], engine,
                           {"gate": "FIND"}, {"gate": "FIND FIND"})
    assert [b.kind for b in found] == [BreakKind.UNKNOWN_FLAG, BreakKind.PATCH_GONE]
    assert "ambiguous" in found[0].detail and "2 times" in found[1].detail
