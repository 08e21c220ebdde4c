"""Which trial wins once a close pair is re-measured: ranked by the mean less one standard error.

Studies written here with Optuna's own records (in memory); the rank, the close pair and the
winner's lines are pure functions of them.
"""

from __future__ import annotations

from statistics import fmean, stdev

import optuna
import pytest

from tuner.study.record import (
    EMULATED, EMULATED_NOISE, REPEATS, STABLE, best_stable, close_pair, records, study_noise, winner_lines,
)


def _study(values: list[float], repeats: dict[int, list[float]], *, emulated: bool = True) -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    for value in values:
        study.add_trial(optuna.trial.create_trial(value=value, user_attrs={STABLE: True}))
    study.set_user_attr(EMULATED, emulated)
    study.set_user_attr(REPEATS, {str(n): {"values": v, "failed": [], "host_seconds": []} for n, v in repeats.items()})
    return study


def test_a_trial_measured_once_does_not_outrank_a_re_measured_pair_on_one_lucky_run() -> None:
    # trials 1 and 2 were the close pair at 1,050 and 1,045; re-measured, their means fell to about
    # 987 and 1,002; trial 0 read 1,003 once, the same within noise: the re-measured trial wins
    study = _study([1003.0, 1050.0, 1045.0], {1: [1050.0, 960.0, 950.0], 2: [1045.0, 990.0, 970.0]})
    assert best_stable(study).number == 2  # mean 1,001.7, three runs
    lines = winner_lines(study)
    assert lines[0].startswith("winner: trial 2: 1,002 tok/s +- 3.9% over 3 runs")
    assert "tied: trial 2" in lines[1] and "trial 0 (1,003 tok/s)" in lines[1]
    # the close pair is now trial 2 and trial 0, and trial 0 needs re-runs
    pair = close_pair(records(study), study_noise(study).relative)
    assert pair is not None and [r.number for r in pair] == [2, 0]


def test_a_trial_measured_once_that_reads_more_by_more_than_the_noise_still_wins() -> None:
    study = _study([1030.0, 1050.0, 1045.0], {1: [1050.0, 960.0, 950.0], 2: [1045.0, 990.0, 970.0]})
    assert best_stable(study).number == 0  # 1,030 x (1 - 2.2%) = 1,007 > 1,002 x (1 - 2.2% / sqrt 3) = 989


def test_trials_measured_once_rank_by_their_value() -> None:
    values = [812.0, 990.5, 990.4, 1200.0, 1199.9, 450.0]
    study = _study(values, {})
    noise = study_noise(study).relative
    assert noise == pytest.approx(EMULATED_NOISE)
    ranked = sorted(records(study), key=lambda r: r.rank(noise), reverse=True)
    assert [r.number for r in ranked] == sorted(range(len(values)), key=lambda n: -values[n])


def test_on_a_real_host_the_noise_is_the_largest_measured_spread() -> None:
    study = _study([1000.0, 1010.0], {1: [1010.0, 900.0, 1100.0]}, emulated=False)
    noise = study_noise(study)
    assert noise.relative == pytest.approx(stdev([1010.0, 900.0, 1100.0]) / fmean([1010.0, 900.0, 1100.0]))
    assert "measured over 1" in noise.source
    # trial 1's mean 1,003 at 10% noise over 3 runs ranks by 1,003 - 58 = 945; trial 0 by 1,000 - 100 = 900
    assert best_stable(study).number == 1


class _Console:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def print(self, line: str, **_: object) -> None:
        self.lines.append(line)


def test_the_pair_is_read_again_after_each_re_run_and_a_trial_measured_once_gets_the_runs_left(monkeypatch) -> None:
    from types import SimpleNamespace

    from tuner.study.loop import Confirmation

    # trials 1 and 2 lead on one lucky run each; each re-run reads lower; trial 0 reads 1,000 again
    study = _study([1000.0, 1050.0, 1045.0], {})
    again = {0: 1000.0, 1: 960.0, 2: 975.0}
    ran: list[int] = []

    def run_again(self, record, runner, runs, progress) -> bool:  # the host's part: one re-run's value
        ran.append(record.number)
        self._store(record, again[record.number], None, 1.0)
        return True

    monkeypatch.setattr(Confirmation, "_run_again", run_again)
    space = SimpleNamespace(objective=SimpleNamespace(minimize=None, metric="output_throughput"))
    progress = SimpleNamespace(console=_Console())
    made = Confirmation(study, space).run(runner=None, budget=6, progress=progress)
    assert made == 6 and ran[:2] == [1, 2]  # the close pair first, the best of it first
    assert ran.count(0) == 2  # their means fell below trial 0's: it got the runs left
    assert best_stable(study).number == 0  # 1,000 over 3 runs, against 998 and 990
    assert any(line.startswith("winner: trial 0: 1,000 tok/s +- 2.2% over 3 runs") for line in progress.console.lines)


def _with_configs(values: list[float], configs: list[dict]) -> optuna.Study:
    from tuner.study.record import CONFIG, IS_BASELINE

    study = optuna.create_study(direction="maximize")
    for number, (value, config) in enumerate(zip(values, configs)):
        study.add_trial(optuna.trial.create_trial(
            value=value, user_attrs={STABLE: True, CONFIG: config, IS_BASELINE: number == 0}))
    study.set_user_attr(EMULATED, True)
    return study


def test_a_tie_names_the_one_that_changes_fewer_settings_from_the_baseline() -> None:
    baseline = {"moe": "auto", "cap": 64, "graphs": True, "mem": 0.88}
    three = {**baseline, "moe": "cutlass", "cap": 1024, "mem": 0.93}
    two = {**baseline, "moe": "cutlass", "cap": 1024}
    lines = winner_lines(_with_configs([1000.0, 1505.0, 1500.0], [baseline, three, two]))
    assert lines[0].startswith("winner: trial 1: 1,505 tok/s")
    assert lines[1].endswith("trial 2 is the simpler (2 settings changed from the baseline against 3): "
                             "`tuner export --trial 2`")
    lines = winner_lines(_with_configs([1000.0, 1505.0, 1500.0], [baseline, two, three]))
    assert lines[1].endswith("; either may be exported; trial 1 is also the simpler "
                             "(2 settings changed from the baseline against 3)")
    other_two = {**baseline, "moe": "cutlass", "graphs": False}
    one = {**baseline, "cap": 1024}
    lines = winner_lines(_with_configs([1000.0, 1505.0, 1500.0], [baseline, one, two]))
    assert lines[1].endswith("trial 1 is also the simpler (1 setting changed from the baseline against 2)")
    lines = winner_lines(_with_configs([1000.0, 1505.0, 1500.0], [baseline, two, other_two]))
    assert lines[1].endswith("either may be exported")  # as many changes: nothing to prefer
    lines = winner_lines(_with_configs([1000.0, 1505.0, 1300.0], [baseline, three, two]))
    assert len(lines) == 1  # not tied: the winner alone


def test_a_noise_stated_in_the_space_holds_until_re_measures_measure_one() -> None:
    from tuner.study.record import STATED_NOISE

    study = _study([1000.0, 1080.0], {}, emulated=False)
    assert study_noise(study).relative == pytest.approx(0.02)  # nothing stated, nothing measured
    study.set_user_attr(STATED_NOISE, 0.06)
    noise = study_noise(study)
    assert noise.relative == pytest.approx(0.06) and "stated in the search space" in noise.source
    # 8% apart, one run each: beyond two standard errors of the difference at 2% (5.7%), within
    # them at the stated 6% (17%)
    pair = close_pair(records(study), noise.relative)
    assert pair is not None and [r.number for r in pair] == [1, 0]
    assert close_pair(records(study), 0.02) is None
    # re-runs that happened to agree (0.5%) do not lower what the user knows of the host
    study.set_user_attr(REPEATS, {"1": {"values": [1080.0, 1070.0, 1075.0], "failed": []}})
    noise = study_noise(study)
    assert noise.relative == pytest.approx(0.06) and "the re-measures read 0.5%" in noise.source
    # a larger measured spread replaces it
    study.set_user_attr(REPEATS, {"1": {"values": [1040.0, 900.0, 1100.0], "failed": []}})
    noise = study_noise(study)
    assert noise.relative == pytest.approx(stdev([1040.0, 900.0, 1100.0]) / fmean([1040.0, 900.0, 1100.0]))
    assert "measured over 1" in noise.source


def _level(c: int, tps: float, bound: str | None = None, in_flight: float | None = None) -> dict:
    return {"concurrency": c, "num_requests": 4 * c, "completed": 4 * c, "failed": 0,
            "duration_s": 10.0, "input_tokens": 0, "output_tokens": 0, "total_throughput": tps,
            "request_throughput": 1.0, "stop_reason": None, "output_throughput": tps,
            "measurement_bound": bound, "in_flight": in_flight}


def test_re_runs_are_read_at_the_same_level_and_a_bound_run_is_not_the_hosts_noise() -> None:
    from tuner.study.record import LEVELS

    study = optuna.create_study(direction="maximize")
    study.set_user_attr(EMULATED, False)
    own = [_level(256, 2900.0), _level(512, 3800.0)]
    study.add_trial(optuna.trial.create_trial(value=3800.0, user_attrs={STABLE: True, LEVELS: own}))
    # re-run 1: the same level measured (3,760); re-run 2: the client under-drove c=512 (2,000
    # of a lower bound, 300 of 512 in flight) and its best level was c=256
    again = [[_level(256, 2950.0), _level(512, 3760.0)],
             [_level(256, 2950.0), _level(512, 2000.0, "late sends", 300.0)]]
    study.set_user_attr(REPEATS, {"0": {"values": [3800.0, 3760.0, 2950.0], "failed": [],
                                        "levels": again, "host_seconds": []}})
    spread = records(study)[0].spread()
    assert spread.concurrency == 512 and spread.runs == 3 and spread.bound_runs == 1
    assert spread.mean == pytest.approx(fmean([3800.0, 3760.0, 2000.0]))
    assert "1 a lower bound" in spread.text()
    # the client's shortfall is not the host's noise: nothing measured, the assumed 2% stands
    noise = study_noise(study)
    assert noise.relative == pytest.approx(0.02) and "assumed" in noise.source


def test_a_lead_is_clear_beyond_two_standard_errors_of_the_difference() -> None:
    from tuner.study.record import Spread
    from tuner.study.record._spread import lead_is_clear

    # one run each at 2%: the difference's standard error is 2.83%, so 5.7% is the line
    assert not lead_is_clear(Spread(1055.0, 20.0, 1), Spread(1000.0, 20.0, 1))
    assert lead_is_clear(Spread(1060.0, 20.0, 1), Spread(1000.0, 20.0, 1))
    # three runs each: 3.3%
    assert lead_is_clear(Spread(1034.0, 20.0, 3), Spread(1000.0, 20.0, 3))
    assert not lead_is_clear(Spread(1030.0, 20.0, 3), Spread(1000.0, 20.0, 3))


def test_the_exported_figure_of_a_re_measured_winner_is_the_mean_of_its_runs() -> None:
    from tuner.export import _measured_line

    study = _study([1050.0, 1000.0], {0: [1050.0, 990.0, 1000.0]})
    winner = records(study)[0]
    assert _measured_line(winner, emulated=True) == "# measured: 1,013 output tok/s (mean of 3 runs) emulated"
    assert _measured_line(records(study)[1], emulated=False) == "# measured: 1,000 output tok/s (best clean level)"
