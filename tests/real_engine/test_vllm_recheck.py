"""`tuner recheck` on a real engine: vLLM on this machine's CPU, run locally.

A short study (the baseline, ``--max-num-seqs 2``, and ``--max-num-seqs 32`` queued) is
rechecked on the vLLM installed now: its ``--help`` is read for the version check, the baseline
and the winner are started afresh twice each, interleaved, and the verdict says the winner still
wins (32 sequences a step against 2 serve several times the tokens on this CPU). The version
check is also run on a stored launch this vLLM cannot take: a flag it lacks and a value outside
a flag's choices, both read from the real ``--help``.
"""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest

from tests.real_engine.conftest import run_tuner, space_on
from tests.support.sshd import free_port
from tuner.recheck import BreakKind, StoredLaunch, installed_interface, version_breaks
from tuner.space import load_space
from tuner.study.record import REPEATS
from tuner.study.trial import build_target

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]


def test_a_short_studys_winner_is_rechecked_on_the_installed_vllm(tiny_model: Path, tmp_path: Path) -> None:
    space = space_on(tmp_path, "vllm-cpu-tiny.yaml", tiny_model, free_port())
    storage = ["--storage", f"sqlite:///{tmp_path / 'recheck.db'}"]
    run_tuner("enqueue", str(space), "--set", "max_num_seqs=32", *storage, cwd=tmp_path, timeout=60)
    run_tuner("optimize", str(space), "--trials", "2", "--seed", "3", *storage, cwd=tmp_path, timeout=900)
    done = run_tuner("recheck", str(space), "--top", "1", "--runs", "2", *storage, cwd=tmp_path, timeout=900)
    said = done.stderr
    print(said[-3000:])  # `pytest -s`: then against now, and the verdict

    version = re.search(r"engine: (\S+) installed, as the study ran", said)
    assert version, said[-3000:]
    order = [line.split(": ", 1)[1] for line in said.splitlines() if line.startswith("recheck run ")]
    assert order == ["baseline (trial 0)", "winner (trial 1)"] * 2
    assert re.search(r"c=32 +then \(" + re.escape(version.group(1)) + r"\) [\d,]+ tok/s +now [\d,]+ tok/s "
                     r"\+- [\d.]+% over 2 runs +change [+-][\d.]+%", said), said[-3000:]
    assert "verdict: the winner STILL WINS: winner (trial 1)" in said
    assert "next: the export stands" in said
    recheck = optuna.load_study(study_name=f"vllm-cpu-tiny-recheck-{version.group(1)}", storage=storage[1])
    trials = recheck.get_trials(deepcopy=False)
    assert [t.user_attrs["warm_start_from"] for t in trials] == ["vllm-cpu-tiny#0", "vllm-cpu-tiny#1"]
    assert all(len(r["values"]) == 2 for r in recheck.user_attrs[REPEATS].values())


def test_the_version_check_reads_the_real_help(tiny_model: Path, tmp_path: Path) -> None:
    space = load_space(space_on(tmp_path, "vllm-cpu-tiny.yaml", tiny_model, free_port()))
    target = build_target(space, emulate=False)
    try:
        engine = installed_interface(space, target)
    finally:
        target.close()
    assert "--max-num-seqs" in engine.flags and "balanced" in engine.choices["--performance-mode"]
    launch = StoredLaunch(4, (("--max-num-seqs", "8"), ("--max-num-seq-groups", "8"),
                              ("--performance-mode", "fastest")))
    found = {b.kind: b for b in version_breaks([launch], engine, {}, {})}
    assert set(found) == {BreakKind.UNKNOWN_FLAG, BreakKind.NOT_A_CHOICE}
    assert found[BreakKind.UNKNOWN_FLAG].what == "--max-num-seq-groups"
    assert found[BreakKind.NOT_A_CHOICE].what == "--performance-mode fastest"
