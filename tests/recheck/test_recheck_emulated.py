"""`tuner recheck` and `tuner optimize --from-study` across an emulated engine upgrade: a study
run on SGLang 0.5.9, then the emulated host upgraded to 0.5.10 (``$TUNER_EMULATOR_SGLANG_VERSION``:
``--cuda-graph-max-bs`` renamed, ``--disable-radix-cache`` 12% slower instead of 1% faster)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
import yaml

from tests.study.conftest import N_ON, EmulatedStudy
from tests.support.leftovers import stop_servers_left_in
from tests.support.signals import sigint_default
from tuner.study.storage import open_storage
from tuner.study.record import repeats_of

QUICK = {"levels": [64, 256, 512], "output_len": 64, "requests_per_level": {"per_concurrency": 1, "min": 64},
         "time_scale": 200, "stream_interval": 32}
UPGRADED = {"TUNER_EMULATOR_SGLANG_VERSION": "0.5.10"}
RADIX_OFF = {**N_ON, "radix_cache": False, "chunked_prefill_size": 16384}  # wins on 0.5.9 by ~3%
RENAMED = {**N_ON, "cuda_graph_max_bs": 64}  # its flag is renamed in 0.5.10
PLAIN = {**N_ON}


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory):
    """A 4-configuration study on 0.5.9, then `tuner recheck --top 3 --runs 2` on 0.5.10."""
    run = EmulatedStudy(tmp_path_factory.mktemp("recheck"), workload__emulated=QUICK)
    for config in (RADIX_OFF, RENAMED, PLAIN):
        run.enqueue(config)
    # 5: four configurations, then the winner run again (seeded: radix off wins on 0.5.9, 2,355 to 2,189)
    run.optimize(5, "--seed", "1")
    result = run.run("recheck", str(run.path), "--emulate", "--port", str(run.port), "--top", "3", "--runs", "2",
                     env=UPGRADED, timeout=600)
    return run, result


def _study(run: EmulatedStudy, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=open_storage(run.storage))


def test_the_version_check_names_the_renamed_flag_before_any_run(upgraded) -> None:
    _, result = upgraded
    text = result.stderr
    assert "engine: 0.5.10 installed; study glm5t ran on 0.5.9 (4 trials)" in text
    line = next(ln for ln in text.splitlines() if "breaks: unknown flag: --cuda-graph-max-bs" in ln)
    assert "--cuda-graph-max-batch-size" in line and "(trial 2)" in line
    assert text.index("breaks:") < text.index("recheck run 1 of 2")


def test_runs_are_interleaved_fresh_starts_kept_in_a_recheck_study(upgraded) -> None:
    run, result = upgraded
    order = [ln.split(": ", 1)[1] for ln in result.stderr.splitlines() if ln.startswith("recheck run ")]
    assert len(order) == 6 and order[:3] == order[3:], order  # round 1, then round 2 in the same order
    assert order[0] == "baseline (trial 0)" and order[1].startswith("winner (trial ")
    assert not any("(trial 2)" in label for label in order)  # its flag is unknown: never started
    recheck = _study(run, "glm5t-recheck-0.5.10")
    trials = recheck.get_trials(deepcopy=False)
    assert sorted(t.user_attrs["warm_start_from"] for t in trials) == ["glm5t#0", "glm5t#1", "glm5t#3"]
    assert all(t.user_attrs["engine_version"] == "0.5.10" for t in trials)
    repeats = repeats_of(recheck.user_attrs)
    assert all(len(repeats[str(t.number)]["values"]) == 2 for t in trials)  # two fresh starts each
    assert "(trial 2): unknown flag --cuda-graph-max-bs" in result.stderr


def test_the_verdict_follows_the_changed_effect(upgraded) -> None:
    run, result = upgraded
    winner = next(t for t in _study(run, "glm5t").get_trials(deepcopy=False)
                  if f"winner (trial {t.number})" in result.stderr)
    rows = [ln for ln in result.stderr.splitlines() if ln.startswith("verdict:")]
    assert len(rows) == 1
    if winner.user_attrs["config"]["radix_cache"] is False:  # 12% slower on 0.5.10: beaten by PLAIN
        assert rows[0].startswith("verdict: the winner LOST ITS LEAD: #")
        # by how much depends on the emulator's noise and this machine's load (+1.4% once,
        # 2026-12-07, beside a benchmark): the verdict says which, and names the leader only beyond noise
        if "beyond noise" in rows[0]:
            assert "next: deploy #" in result.stderr and "--trial 3 --out launch.sh" in result.stderr
        else:
            assert "within noise: the order cannot be told" in rows[0], rows[0]
    else:
        assert rows[0].startswith("verdict: the winner STILL WINS")
    assert "change -1" in result.stderr  # the radix-off configuration's drop, per level (-10% to -13%)


def test_optimize_names_the_break_before_any_host_time(upgraded) -> None:
    """The old space on the upgraded host: ``optimize`` says what the version breaks of the stored
    configurations, then its preflight refuses the space's own version, and no trial runs."""
    run, _ = upgraded
    before = len(_study(run, "glm5t").get_trials(deepcopy=False))
    result = run.run("optimize", str(run.path), "--emulate", "--port", str(run.port), "--storage", run.storage,
                     "--study-name", "glm5t", "--trials", "1", env=UPGRADED, check=False)
    said = result.stderr
    assert result.returncode != 0, said[-3000:]
    assert "breaks: unknown flag: --cuda-graph-max-bs: unknown in 0.5.10; renamed? this version has " \
           "--cuda-graph-max-batch-size" in said, said[-3000:]
    assert len(_study(run, "glm5t").get_trials(deepcopy=False)) == before


def test_a_study_from_the_old_one_starts_from_the_rechecked_figures(upgraded) -> None:
    run, _ = upgraded
    document = yaml.safe_load(run.path.read_text())
    document["engine_version"] = "0.5.10"
    document["parameters"]["cuda_graph_max_bs"]["flag"] = "--cuda-graph-max-batch-size"
    new = run.dir / "glm5t-new.yaml"
    new.write_text(yaml.safe_dump(document, sort_keys=False))
    result = run.run("optimize", str(new), "--emulate", "--port", str(run.port), "--storage", run.storage,
                     "--study-name", "glm5t-new", "--from-study", "glm5t", "--trials", "1", env=UPGRADED,
                     timeout=600)
    assert "from study glm5t: copied 3 rechecked run(s) of glm5t-recheck-0.5.10; queued 1" in result.stderr
    # optimize checks the version change before any host time, as recheck does: the stored
    # configurations rendered by the new space (its renamed flag) still apply
    said = result.stderr
    check = "engine: 0.5.10 installed; study glm5t-new (with glm5t) ran on 0.5.9 (4 trials)"
    assert check in said and "every stored configuration's flags, values and patches still apply" in said, said[-3000:]
    assert said.index(check) < said.index("from study glm5t:") < said.index("trial 3 (1/1)")
    trials = _study(run, "glm5t-new").get_trials(deepcopy=False)
    copied, ran = trials[:3], trials[3:]
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in copied)
    assert [t.user_attrs["is_baseline"] for t in copied] == [True, False, False]  # no baseline run again
    assert len(ran) == 1 and ran[0].user_attrs["warm_start_from"] == "glm5t#2"  # the renamed one, now runnable
    assert "--cuda-graph-max-batch-size 64" in ran[0].user_attrs["command_line"]
    assert ran[0].state == optuna.trial.TrialState.COMPLETE


def test_ctrl_c_keeps_every_finished_run_and_the_recheck_continues(upgraded) -> None:
    """A third round, interrupted once its first run is stored: exit 130, no server left, the
    stored run kept; run again, only what is left runs."""
    run, _ = upgraded
    args = ["recheck", str(run.path), "--emulate", "--port", str(run.port), "--top", "1", "--runs", "3",
            "--skip-doctor"]
    command = sigint_default([sys.executable, "-m", "tuner", *args])
    tuner = subprocess.Popen(command, cwd=run.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, env={**os.environ, **UPGRADED})
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and tuner.poll() is None and _runs(run).get("glm5t#0", 0) < 3:
            time.sleep(0.2)
        tuner.send_signal(signal.SIGINT)
        first, _ = tuner.communicate(timeout=120)
    finally:
        if tuner.poll() is None:
            os.killpg(tuner.pid, signal.SIGKILL)
    assert tuner.returncode in (0, 130), first  # 0: the last run ended before the signal came
    assert stop_servers_left_in(run.dir) == []
    assert _runs(run)["glm5t#0"] == 3  # the baseline's third run is stored
    again = run.run(*args, env=UPGRADED, timeout=300)
    started = [ln for ln in again.stderr.splitlines() if ln.startswith("recheck run ")]
    assert not any("baseline" in ln for ln in started), again.stderr  # its stored run is not repeated
    assert len(started) <= 1  # the winner's third run, unless it ended before the signal
    assert sorted(_runs(run).values()) == [2, 3, 3]  # the baseline and the winner; the third of --top 3 kept


def _runs(run: EmulatedStudy) -> dict[str, int]:
    """``<study>#<trial>`` -> runs stored in the recheck study."""
    recheck = _study(run, "glm5t-recheck-0.5.10")
    repeats = repeats_of(recheck.user_attrs)
    return {t.user_attrs["warm_start_from"]: len((repeats.get(str(t.number)) or {}).get("values", []))
            for t in recheck.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE}
