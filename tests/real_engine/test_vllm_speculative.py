"""Issue 29 point 6: a parallel/speculative dimension measured on a real engine, beyond noise.

vLLM on this machine's CPU serves the tiny random-weight Llama; the study of
``search_spaces/vllm-cpu-speculative.yaml`` runs six trials, no sampling: three adjacent pairs
of a server without and with n-gram speculation (``--speculative-config '{"method":"ngram",...}'``
composed from three parameters), each pair on a server of its own that serves one stream alike
(the baseline; ``--data-parallel-size 1`` written out, vLLM's default; ``--max-num-seqs 2``), so
that a drift of the machine moves both servers of a pair.

The random model loops under greedy decoding, so prompt-lookup drafts are accepted (74% of draft
tokens measured) and one engine step yields several tokens; the space preloads Intel OpenMP, as
vLLM's CPU worker asks for speculation. The mean of the three pairs' ratios (n-gram over none)
must differ from 1 by more than 10% and by more than twice its standard error; the figures are
printed (``pytest -s``).

Measured (2026-12-05, docs/measurements.md): by hand 367/354 output tok/s without speculation,
462/490 with it; this test with two pairs (09:02, 09:07 UTC: 1.35x, 1.28x; 1.44x, 1.15x, the
second pair of each run 11-15% below the first for both servers) and with three (09:12 UTC:
1.20x, 1.08x, 1.26x, +18%, standard error 0.05): 7 pairs of 7 faster with speculation, +25% on
average (standard error 0.045). One pair in a run can read as little as 1.08x, so the test stays
marked ``noisy`` (a run can miss its margin by chance on this shared 2-core machine) and is run
by hand: ``python3 -m pytest -s -n 0 -m vllm --run-noisy tests/real_engine/test_vllm_speculative.py``.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.real_engine.conftest import run_tuner, space_on
from tests.support.sshd import free_port
from tuner.study.storage import open_storage

pytestmark = [pytest.mark.vllm, pytest.mark.noisy, pytest.mark.timeout(1500)]

SPECULATION = ("speculative_method=ngram", "num_speculative_tokens=4", "prompt_lookup_max=4")
# Three servers that serve one stream alike, so that each pair runs on a configuration of its own
# (the tuner runs a configuration once and reuses its figures): the baseline, vLLM's default
# --data-parallel-size 1 written out, and room for a second sequence that one stream never uses.
ALIKE = ((), ("data_parallel_size=1",), ("max_num_seqs=2",))


def _sets(values: tuple[str, ...]) -> list[str]:
    return [word for value in values for word in ("--set", value)]


def test_ngram_speculation_moves_throughput_beyond_the_spread(tiny_model: Path, tmp_path: Path) -> None:
    space = space_on(tmp_path, "vllm-cpu-speculative.yaml", tiny_model, free_port())
    queued = [SPECULATION] + [values for alike in ALIKE[1:] for values in (alike, alike + SPECULATION)]
    for values in queued:
        run_tuner("enqueue", str(space), *_sets(values), cwd=tmp_path, timeout=120)
    # 7: the six queued configurations, then the winner's re-run (WINNER_RUNS)
    done = run_tuner("optimize", str(space), "--trials", "7", "--seed", "5", "--no-feasibility",
                     # vLLM's --help took over 180 s at load 11 (the doctor's flags check);
                     # tests/space/test_json_flags.py and the start itself check the flags
                     "--skip-doctor", cwd=tmp_path, timeout=1400)

    storage = open_storage(str(tmp_path / "studies" / "vllm-cpu-speculative.db"))
    trials = optuna.load_study(study_name="vllm-cpu-speculative", storage=storage).get_trials()
    assert len(trials) == 6 and all(t.state == TrialState.COMPLETE for t in trials), (
        done.stdout[-3000:], [(t.number, t.state, t.user_attrs.get("failure_detail")) for t in trials])
    lines = [t.user_attrs["command_line"] for t in trials]
    flag = """--speculative-config '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}'"""
    assert [flag in line for line in lines] == [False, True] * 3
    assert ["--data-parallel-size 1" in line for line in lines] == [False, False, True, True, False, False]
    # This shared machine drifts (in one run every server of the second pair read 11-15% below
    # the first pair's): the effect is read within each adjacent pair of alike servers, and its
    # noise is how much the three pairs disagree.
    values = [t.value for t in trials]
    ratios = [values[i + 1] / values[i] for i in (0, 2, 4)]
    effect = statistics.mean(ratios) - 1
    error = statistics.stdev(ratios) / len(ratios) ** 0.5
    print(f"output tok/s at c=1 (none, n-gram) in three pairs: "
          + "; ".join(f"{values[i]:.1f}, {values[i + 1]:.1f}" for i in (0, 2, 4))
          + f"; n-gram/none {', '.join(f'{r:.2f}x' for r in ratios)}: effect {effect:+.0%} "
          f"(standard error {error:.2f})")
    assert abs(effect) > max(2 * error, 0.10), values
