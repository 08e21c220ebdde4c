"""The pure performance model: the table, saturation, the other flags, failures, noise."""

from __future__ import annotations

import random

import pytest

from tuner.emulator import Failure, build_engine, predict_throughput
from tuner.emulator.calibration import CALIBRATION_LEVELS, CALIBRATION_POINTS, CRASH, KV, point
from tuner.emulator.cli_args import parse_server_args


def flags(argv: list[str]) -> dict[str, object]:
    """Server args of a command line, without the emulator's own flags."""
    args = parse_server_args(argv)
    args.pop("time_scale")
    args.pop("emulator_seed")
    return args


N_ON = point("N-on")


def n_on(*extra: str, concurrency: int, **kwargs: object) -> float | Failure:
    return predict_throughput(flags([*N_ON.full_argv(), *extra]), True, False, concurrency,
                              **kwargs)


@pytest.mark.parametrize("row", CALIBRATION_POINTS, ids=lambda p: p.id)
def test_noiseless_prediction_matches_every_figure_of_the_table(row) -> None:
    for concurrency, figure in row.throughput.items():
        got = predict_throughput(flags(row.full_argv()), row.patched_gate, row.forced_allreduce,
                                 concurrency)
        if figure == CRASH:
            assert isinstance(got, Failure) and got.kind == "crash-under-load"
            assert got.at_concurrency == concurrency
            assert "'PrefillMetadata' object has no attribute 'topk_indices'" in got.message
        else:
            assert isinstance(got, float), (row.id, concurrency, got)
            assert got == pytest.approx(figure, rel=0.03), (row.id, concurrency)


def test_noise_is_a_few_percent_and_follows_the_seed() -> None:
    runs = [n_on(concurrency=256, rng=random.Random(seed)) for seed in range(12)]
    assert all(isinstance(r, float) for r in runs)
    assert 0.93 * 2000 < min(runs) < max(runs) < 1.07 * 2000
    assert max(runs) / min(runs) > 1.01  # noise is there
    assert n_on(concurrency=256, rng=random.Random(3)) == n_on(concurrency=256,
                                                               rng=random.Random(3))


def test_max_running_requests_caps_the_batch_and_throughput_stops_rising() -> None:
    capped = [n_on("--max-running-requests", "64", concurrency=c) for c in (256, 512, 1024)]
    assert max(capped) / min(capped) < 1.03
    assert capped[0] < 0.6 * n_on(concurrency=256)
    engine = build_engine(flags(N_ON.full_argv()), True, False)
    assert engine.settings.max_running == 2048 and engine.settings.kv_tokens == KV.tokens_at_reference


def test_kv_pool_follows_mem_fraction_and_makes_requests_queue_at_1024() -> None:
    pools = {f: build_engine(flags([*N_ON.full_argv(), "--mem-fraction-static", str(f)]),
                             True, False).settings.kv_tokens for f in (0.85, 0.90, 0.93)}
    assert pools[0.85] == KV.tokens(0.85) and pools[0.93] == KV.tokens(0.93)
    assert 967 == KV.tokens(0.92) // 512  # at 0.92 a few of 1,024 requests queue
    smaller, larger = (n_on("--mem-fraction-static", f, concurrency=1024) for f in ("0.85", "0.93"))
    assert smaller < 0.95 * larger
    assert n_on("--mem-fraction-static", "0.85", concurrency=512) == pytest.approx(
        n_on(concurrency=512), rel=0.01)  # 512 requests fit in both pools


OTHER_FLAGS = [
    ("--chunked-prefill-size", "2048"), ("--chunked-prefill-size", "16384"),
    ("--chunked-prefill-size", "-1"), ("--schedule-conservativeness", "0.5"),
    ("--schedule-conservativeness", "1.5"), ("--disable-radix-cache",),
    ("--cuda-graph-max-bs", "64"), ("--cuda-graph-max-bs", "1024"),
    ("--cuda-graph-max-bs", "2048"), ("--kv-cache-dtype", "bf16"),
    ("--kv-cache-dtype", "fp8_e4m3"), ("--attention-backend", "triton"),
    ("--attention-backend", "torch_native"), ("--attention-backend", "flex_attention"),
    ("--attention-backend", "trtllm_mha"), ("--disable-overlap-schedule",),
]


@pytest.mark.parametrize("extra", OTHER_FLAGS, ids=" ".join)
def test_each_other_flag_alone_moves_n_on_by_at_most_ten_percent(extra: tuple[str, ...]) -> None:
    for concurrency in CALIBRATION_LEVELS:
        base, changed = n_on(concurrency=concurrency), n_on(*extra, concurrency=concurrency)
        assert isinstance(changed, float)
        assert 0.9 <= changed / base <= 1.1, (extra, concurrency, changed / base)


def test_documented_directions_of_the_other_flags() -> None:
    assert n_on("--disable-radix-cache", concurrency=512) > 1.005 * n_on(concurrency=512)
    assert n_on("--chunked-prefill-size", "2048", concurrency=1024) < 0.93 * n_on(
        concurrency=1024)
    assert n_on("--attention-backend", "triton", concurrency=256) < 0.95 * n_on(concurrency=256)
    # Below 1, more requests run and the newest are retracted when the pool fills: on one wave
    # of 1,024 requests (the demo's) the queue's tail goes, on two waves the retractions cost more.
    one_wave = {"concurrency": 1024, "num_requests": 1024}
    assert n_on("--schedule-conservativeness", "0.8", **one_wave) > 1.02 * n_on(**one_wave)
    assert n_on("--schedule-conservativeness", "0.8", concurrency=1024) < n_on(concurrency=1024)


def test_a_combination_beats_n_on_by_a_few_percent() -> None:
    combo = ("--disable-radix-cache", "--chunked-prefill-size", "16384",
             "--mem-fraction-static", "0.93")
    for concurrency in (512, 1024):
        assert n_on(*combo, concurrency=concurrency) > 1.02 * n_on(concurrency=concurrency)


def test_trtllm_without_a_cap_scales_worse_than_cutlass_but_better_than_b() -> None:
    argv = [*point("B").full_argv()[:-2]]  # B without --max-running-requests 64
    trtllm = predict_throughput(flags(argv), False, False, 1024)
    assert 880 * 1.5 < trtllm < n_on(concurrency=1024)


def test_failures_at_start() -> None:
    def kind(*extra: str) -> str:
        got = n_on(*extra, concurrency=64)
        assert isinstance(got, Failure)
        return got.kind

    assert kind("--mem-fraction-static", "0.96") == "oom-at-start"
    assert kind("--mem-fraction-static", "0.4") == "oom-at-start"
    assert kind("--tp-size", "4") == "oom-at-start"
    assert kind("--tp-size", "16") == "startup-crash"
    assert kind("--attention-backend", "nsa") == "startup-crash"
    assert kind("--moe-runner-backend", "deep_gemm") == "startup-crash"
    assert kind("--quantization", "fp8") == "refused"  # flashinfer_cutlass takes modelopt only
    assert kind("--ep-size", "4") == "refused"
    assert kind("--kv-cache-dtype", "fp8_e5m2") == "refused"


def test_out_of_memory_under_load_only_at_1024_between_094_and_096() -> None:
    for fraction in ("0.94", "0.95"):
        assert isinstance(n_on("--mem-fraction-static", fraction, concurrency=512), float)
        oom = n_on("--mem-fraction-static", fraction, concurrency=1024)
        assert isinstance(oom, Failure) and oom.kind == "oom-under-load"
        assert "torch.OutOfMemoryError: CUDA out of memory" in oom.message
    assert isinstance(n_on("--mem-fraction-static", "0.93", concurrency=1024), float)


def test_prefill_metadata_crash_needs_graphs_off_and_flashinfer_attention() -> None:
    crash = n_on("--disable-cuda-graph", concurrency=512)
    assert isinstance(crash, Failure) and crash.kind == "crash-under-load"
    assert isinstance(n_on("--disable-cuda-graph", concurrency=256), float)
    assert isinstance(n_on("--disable-cuda-graph", "--attention-backend", "triton",
                           concurrency=512), float)


def test_fa3_is_wrong_output_at_full_speed() -> None:
    got = n_on("--attention-backend", "fa3", concurrency=256)
    assert isinstance(got, Failure) and got.kind == "wrong-output"
    assert got.throughput == pytest.approx(n_on(concurrency=256), rel=0.01)


def test_allreduce_fusion_flag_alone_does_nothing_on_sm120() -> None:
    fused = flags([*N_ON.full_argv(), "--enable-flashinfer-allreduce-fusion"])
    assert predict_throughput(fused, True, False, 256) == pytest.approx(n_on(concurrency=256))
    assert predict_throughput(fused, True, True, 256) == pytest.approx(236, rel=0.03)


def test_flags_as_a_partial_mapping_and_unknown_flags() -> None:
    partial = {"--tp-size": 8, "--quantization": "modelopt_fp4", "mem_fraction_static": 0.92,
               "--moe-runner-backend": "flashinfer_cutlass", "attention_backend": "flashinfer"}
    assert predict_throughput(partial, True, False, 256) == pytest.approx(2000, rel=0.03)
    with pytest.raises(KeyError, match="--attn-dp-size"):
        predict_throughput({**partial, "--attn-dp-size": 2}, True, False, 256)
