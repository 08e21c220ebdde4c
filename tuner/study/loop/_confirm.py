"""A winner beyond noise: the best and the runner-up measured again when they are close.

One run of a configuration differs from the next by the host's run-to-run noise. When the best
stable trial leads the runner-up by less than two standard errors of the difference of their
means (:func:`tuner.study.record.close_pair`), which one wins may be luck; so
before the study ends, each is run again (restarted, probed, every level measured) until it has
:data:`tuner.study.record.CONFIRM_RUNS` runs, and the winner is the higher mean less one
standard error (:meth:`tuner.study.record.TrialRecord.rank`). The pair is read again after each
re-run: when the re-measured means fall (the best of many single runs was luckier than its
configuration), a trial measured once that is now close gets the re-runs left.

**Budget.** Re-measures are trials of the ``--trials`` budget: ``--trials 40`` still bounds the
host time. The optimize loop stops searching as soon as the trials left are no more than the
re-measures the close pair needs plus room for one more trial (the pair's re-runs can read lower
and leave a trial measured once in the lead: the winner is re-measured too), provided the search
has run at least twice as many (so re-measures take at most a third of the budget); when the
pair is not close, every trial of the budget searches, and when the re-runs read the pair apart
before the trials left are spent, the rest search again. A re-run is not a new Optuna trial: its values are stored on the original
trial (the study's ``repeats`` attribute, :mod:`tuner.study.record._spread`), its server logs under
``runs/<study>/repeat-<k>/``, and the summary counts it (``N run, M re-measured``).

**Noise.** The spread the pair is compared with, the close pair and the winner's lines are read
from the study (:mod:`tuner.study.record._winner`).

Not for ``objective.minimize`` (a Pareto front, no single winner) or ``goodput`` (a rate search
per configuration) studies.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import optuna

from tuner.failures import FailureClass
from tuner.errors import ServerFailure, TunerError
from tuner.scrub import Scrubber
from tuner.study import record as attrs
from tuner.study.trial import RepeatTrial
from tuner.study.record import (
    CONFIRM_RUNS,
    REPEATS,
    Spread,
    TrialRecord,
    close_pair,
    read_view,
    winner_lines,
)

if TYPE_CHECKING:
    from tuner.study.loop._progress import ProgressView
    from tuner.study.trial import TrialRunner
    from tuner.space import SearchSpace

__all__ = ["Confirmation"]


# Re-runs kept beyond the close pair's own: one more trial brought close by them.
_ROOM = CONFIRM_RUNS - 1


def _runs_left(pair: tuple[TrialRecord, TrialRecord] | None) -> int:
    if pair is None:
        return 0
    return sum(max(0, CONFIRM_RUNS - (r.spread() or Spread(0, 0, 1)).runs) for r in pair)


@dataclass
class Confirmation:
    """The re-measure of the close pair, for one ``optimize`` run (see the module docstring)."""

    study: optuna.Study
    space: SearchSpace

    @property
    def applies(self) -> bool:
        objective = self.space.objective
        return objective.minimize is None and objective.metric != "goodput"

    def needed(self) -> int:
        """Runs the close pair still needs (0: no close pair)."""
        if not self.applies:
            return 0
        view = read_view(self.study)
        return _runs_left(close_pair(list(view.records), view.noise.relative))

    def stop_search(self, ran: int, budget: int) -> bool:
        """Whether the loop stops searching to leave the rest of the budget to re-measures: the
        runs the close pair needs, and room for one more trial measured once (when the pair's
        re-runs read lower, such a trial can become the best, and the winner is re-measured
        whenever its lead is within two standard errors)."""
        most = 2 * (CONFIRM_RUNS - 1) + _ROOM
        if budget - ran > most:  # more left than a pair and one more could need: no read
            return False
        needed = self.needed()
        if needed == 0:
            return False
        reserve = (
            needed + _ROOM if 2 * (needed + _ROOM) <= ran else needed
        )  # no room in a small budget
        return 2 * reserve <= ran and ran + reserve >= budget

    def run(self, runner: TrialRunner, budget: int, progress: ProgressView) -> int:
        """Re-run the close pair within ``budget`` runs; the number of runs made.

        The pair is read again after each run: when the re-measured trials' means fall, the
        close pair may become a trial measured once and one of them, and the budget left goes to
        that one."""
        if not self.applies:
            return 0
        made = 0
        while made < budget:
            view = read_view(self.study)  # again after each re-run: the pair may change
            noise = view.noise
            pair = close_pair(list(view.records), noise.relative)
            short = [
                (r, runs)
                for r in pair or ()
                if (runs := (r.spread() or Spread(0, 0, 1)).runs) < CONFIRM_RUNS
            ]
            if not short:
                break
            record, runs = short[0]
            assert pair is not None  # short is drawn from it
            progress.console.print(
                f"[cyan]re-measuring trial {record.number}[/] (run {runs + 1} of {CONFIRM_RUNS}): "
                f"trial {pair[0].number} leads trial {pair[1].number} by less than two standard "
                f"errors of the difference (noise {noise.relative:.1%}, {noise.source})",
                highlight=False,
            )
            if not self._run_again(record, runner, runs, progress):
                break
            made += 1
        for line in winner_lines(self.study) if made else ():
            progress.console.print(line, highlight=False)
        return made

    def _run_again(
        self, record: TrialRecord, runner: TrialRunner, runs: int, progress: ProgressView
    ) -> bool:
        """One re-run stored on the original; False when the host failed (no more re-runs)."""
        config = self.space.config_from_params(record.params)
        target = runner.target
        launch = self.space.render(
            config,
            command=target.server_command(record.number, runs),
            port=target.port,
            local=target.local,
        )
        again = dataclasses.replace(
            runner,
            local_runs_dir=runner.local_runs_dir / f"repeat-{runs}",
            on_phase=progress.phase,
            on_level=progress.level_done,
            on_energy=progress.level_energy,
        )
        trial = RepeatTrial(record.number)
        value, failure, host_error = None, None, False
        try:
            with attrs.scrubbing(Scrubber.of(launch.secret_values())):
                value = again.run(trial, config, launch)[0]  # type: ignore[arg-type]  # a RepeatTrial
        except ServerFailure as error:
            failure = error.reason
        except TunerError as error:
            failure, host_error = f"{FailureClass.HOST_ERROR}: {error}", True
        self._store(
            record,
            value,
            failure,
            trial.user_attrs.get(attrs.HOST_SECONDS),
            trial.user_attrs.get(attrs.LEVELS) or [],
        )
        progress.console.print(
            f"  re-run of trial {record.number}: "
            + (f"{value:,.4g}" if value is not None else f"FAIL {failure}"),
            highlight=False,
        )
        return not host_error

    def _store(
        self,
        record: TrialRecord,
        value: float | None,
        failure: str | None,
        host_seconds: float | None,
        levels: list[dict[str, Any]] | None = None,
    ) -> None:
        every = dict(self.study.user_attrs.get(REPEATS) or {})
        mine = dict(
            every.get(str(record.number))
            or {"values": [record.value], "failed": [], "host_seconds": []}
        )
        if value is not None:
            mine["values"] = [*mine["values"], value]
            # each re-run's levels, beside its value (the best at each load is their mean too)
            mine["levels"] = [*mine.get("levels", []), list(levels or [])]
        else:
            mine["failed"] = [*mine["failed"], failure]
        mine["host_seconds"] = [*mine["host_seconds"], host_seconds]
        every[str(record.number)] = mine
        self.study.set_user_attr(REPEATS, every)
