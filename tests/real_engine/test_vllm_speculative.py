"""Issue 29 point 6: a parallel/speculative dimension measured on a real engine, beyond noise.

vLLM on this machine's CPU serves the tiny random-weight Llama; the study of
``search_spaces/vllm-cpu-speculative.yaml`` runs three trials, no sampling:

- the baseline (one stream, no speculation);
- the same server again, ``--data-parallel-size 1`` written out (vLLM's default): its distance
  from the baseline is the run-to-run spread of this machine at this moment;
- n-gram speculation, ``--speculative-config '{"method":"ngram",...}'`` composed from three
  parameters.

The random model loops under greedy decoding, so prompt-lookup drafts are accepted and one engine
step yields several tokens: speculation must move output tok/s by more than twice the spread
(and by more than 10%), whichever way it goes; the figures are printed (``pytest -s``). On a
quiet machine (2026-12-05): baseline 293.9, again 295.4 (spread 1.6), n-gram 340.9 (+16%); at
load 5-6 from other work the spread alone was 126 tok/s, and the test rightly failed; on a quiet
machine again (07:55) 303.6 / 240.8 (spread 62.8) / 323.5: within the noise. So it is marked
``noisy``: left out of the README's test command, run by hand with
``python3 -m pytest -s -n 0 -m vllm --run-noisy tests/real_engine/test_vllm_speculative.py``.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.real_engine.conftest import run_tuner, space_on
from tests.support.sshd import free_port
from tuner.study.storage import open_storage

pytestmark = [pytest.mark.vllm, pytest.mark.noisy, pytest.mark.timeout(1200)]

SPECULATION = ("speculative_method=ngram", "num_speculative_tokens=4", "prompt_lookup_max=4")


def test_ngram_speculation_moves_throughput_beyond_the_spread(tiny_model: Path, tmp_path: Path) -> None:
    space = space_on(tmp_path, "vllm-cpu-speculative.yaml", tiny_model, free_port())
    run_tuner("enqueue", str(space), "--set", "data_parallel_size=1", cwd=tmp_path, timeout=120)
    sets = [word for value in SPECULATION for word in ("--set", value)]
    run_tuner("enqueue", str(space), *sets, cwd=tmp_path, timeout=120)
    done = run_tuner("optimize", str(space), "--trials", "3", "--seed", "5", "--no-feasibility",
                     # vLLM's --help took over 180 s at load 11 (the doctor's flags check);
                     # tests/space/test_json_flags.py and the start itself check the flags
                     "--skip-doctor", cwd=tmp_path, timeout=1100)

    storage = open_storage(str(tmp_path / "studies" / "vllm-cpu-speculative.db"))
    trials = optuna.load_study(study_name="vllm-cpu-speculative", storage=storage).get_trials()
    assert len(trials) == 3 and all(t.state == TrialState.COMPLETE for t in trials), (
        done.stdout[-3000:], [(t.number, t.state, t.user_attrs.get("failure_detail")) for t in trials])
    base, again, speculative = (t.value for t in trials)
    lines = [t.user_attrs["command_line"] for t in trials]
    assert "--data-parallel-size 1" in lines[1]
    assert """--speculative-config '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}'""" in lines[2]
    spread = abs(base - again)
    effect = speculative - (base + again) / 2
    print(f"output tok/s at c=1: baseline {base:.1f}, again {again:.1f} (spread {spread:.1f}), "
          f"ngram speculation {speculative:.1f} ({effect:+.1f}, {speculative / base:.2f}x)")
    assert abs(effect) > max(2 * spread, 0.1 * base), (base, again, speculative)
