"""Parallelism and speculative decoding on the emulated host (tuner/emulator/parallelism.py,
speculative.py): effects by concurrency, failures at start, and the fit refusal before host time."""

from __future__ import annotations

import random

import optuna
import pytest

from tests.support.space import GLM5
from tuner.emulator.perf_model import Failure, build_engine, predict_throughput
from tuner.emulator.speculative import Speculation, decode_log_fields, speculative_metrics
from tuner.space import load_space

N_ON = {"--moe-runner-backend": "flashinfer_cutlass", "--attention-backend": "flashinfer",
        "--mem-fraction-static": 0.92, "--quantization": "modelopt_fp4", "--tp-size": 8,
        "--max-running-requests": 1024}


def _tps(extra: dict, concurrency: int) -> float:
    result = predict_throughput({**N_ON, **extra}, True, False, concurrency,
                                num_requests=max(8, 2 * concurrency))
    assert isinstance(result, float), result
    return result


def _gain(extra: dict, concurrency: int) -> float:
    return _tps(extra, concurrency) / _tps({}, concurrency)


def test_speculation_gains_most_at_one_stream_and_less_at_512() -> None:
    nextn = {"--speculative-algorithm": "NEXTN"}
    at_1, at_512, at_1024 = _gain(nextn, 1), _gain(nextn, 512), _gain(nextn, 1024)
    assert at_1 > 1.3 and at_1 > at_512 + 0.2
    assert at_1024 < 1.0  # verifying 4 tokens a request costs more than it yields when compute-bound


def test_dp_attention_loses_at_low_concurrency_and_gains_at_high() -> None:
    dp = {"--enable-dp-attention": True, "--dp-size": 8}
    assert _gain(dp, 1) < 0.9 and _gain(dp, 64) < 0.95
    assert _gain(dp, 1024) > 1.05


def test_speculation_without_a_cap_runs_48_requests_as_sglang_does() -> None:
    flags = {k: v for k, v in N_ON.items() if k != "--max-running-requests"}
    engine = build_engine({**flags, "--speculative-algorithm": "NEXTN"}, True, False)
    assert not isinstance(engine, Failure) and engine.settings.max_running == 48
    assert engine.settings.speculation == Speculation(3, 1, 4)  # GLM-5's automatic choice
    assert not engine.settings.overlap_schedule


def test_accept_length_metrics_and_log_fields() -> None:
    chain = Speculation(3, 1, 4)
    assert 2.5 < chain.accept_length < 3.2 and chain.accept_rate == chain.accept_length / 4
    assert Speculation(7, 1, 8).accept_rate < 0.5  # deep chains waste drafts
    metrics = speculative_metrics(chain)
    assert metrics["sglang:spec_accept_length"] == pytest.approx(chain.accept_length, abs=1e-4)
    assert speculative_metrics(None) == {"sglang:spec_accept_length": 0.0,
                                         "sglang:spec_accept_rate": 0.0}
    assert decode_log_fields(chain) == f"accept len: {chain.accept_length:.2f}, accept rate: {chain.accept_rate:.2f}, "


@pytest.mark.parametrize(("extra", "kind", "message"), [
    ({"--moe-a2a-backend": "deepep"}, "startup-crash", "GPU 0 and GPU 1 are not connected via NVLink"),
    ({"--tp-size": 6}, "startup-crash", "AssertionError"),
    ({"--tp-size": 4}, "oom-at-start", "CUDA out of memory"),
    ({"--enable-two-batch-overlap": True}, "refused", "moe_a2a_backend cannot be 'none'"),
    ({"--speculative-algorithm": "NEXTN", "--speculative-eagle-topk": 2, "--speculative-num-steps": 3,
      "--attention-backend": "triton"}, "refused", "only supported for the 'flashinfer' backend"),
])
def test_failures_a_pcie_sm120_host_shows_at_start(extra: dict, kind: str, message: str) -> None:
    engine = build_engine({**N_ON, **extra}, True, False)
    assert isinstance(engine, Failure) and engine.kind == kind and message in engine.message


def test_a_405_gb_model_at_tp4_is_refused_before_any_host_time_with_the_arithmetic() -> None:
    space = load_space(GLM5)
    config = space.config({**space.baseline, "tp_size": 4}, drop_inactive=True)
    (violation,) = space.constraint_violations(config)
    assert violation.action == "skip"
    assert "405 GB / (tp 4 x pp 1) = 101.2 GB a GPU > 95.6 GB" in violation.reason
    assert "fix: tp x pp >= 5" in violation.reason
    assert space.constraint_violations(space.baseline) == []


def test_the_new_flags_at_their_defaults_change_no_figure() -> None:
    """Random old-space configurations with the new flags written at SGLang's defaults."""
    space = load_space(GLM5)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=5))
    rng = random.Random(5)
    for _ in range(40):
        config = space.suggest(study.ask())
        flags = {k: v for k, v in N_ON.items()}
        flags["--mem-fraction-static"] = config["mem_fraction_static"]
        flags["--max-running-requests"] = config["max_running_requests"]
        plain = dict(flags)
        flags.update({"--dp-size": 1, "--ep-size": 1, "--moe-a2a-backend": "none"})
        c = rng.choice((64, 256, 1024))
        assert predict_throughput(flags, True, False, c) == predict_throughput(plain, True, False, c)


def test_a_low_acceptance_at_the_top_level_fires_the_profiles_rules() -> None:
    """The emulator's decode line, read through the profile's patterns, fires the rules that
    lower the draft tokens (or steps) and, lower still, turn speculation off."""
    from tuner.engines import load_profile
    from tuner.signals import LogObserver, level_figures

    profile = load_profile("sglang")
    rules = {(r.change, r.direction): r for r in profile.tuning_rules if r.observed.startswith("spec_")}
    for speculation, fired in ((Speculation(7, 1, 8), {("--speculative-num-draft-tokens", "lower"),
                                                       ("--speculative-num-steps", "lower")}),
                               (Speculation(3, 1, 4), set())):
        observer = LogObserver(profile.log_observations)
        observer.feed(f"[2026-12-04 20:00:00 TP0] Decode batch, #running-req: 512, #token: 9, "
                      f"token usage: 0.10, {decode_log_fields(speculation)}cuda graph: True, "
                      "gen throughput (token/s): 1.00, #queue-req: 0, ", "level")
        seen = level_figures(observer, "level", 512)
        assert seen["spec_accept_rate"] == round(speculation.accept_rate, 2)
        assert {key for key, rule in rules.items() if rule.fires(seen)} == fired
    assert rules[("--speculative-algorithm", "off")].fires({"spec_accept_len": 1.4})
