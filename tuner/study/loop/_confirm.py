"""A winner beyond noise: the best measured again, and the runner-up too when they are close.

One run of a configuration differs from the next by the host's run-to-run noise. When the best
stable trial leads the runner-up by less than two standard errors of the difference of their
means (:func:`tuner.study.record.close_pair`), which one wins may be luck; so
before the study ends, each is run again (restarted, probed, every level measured) until it has
:data:`tuner.study.record.CONFIRM_RUNS` runs, and the winner is the higher mean less one
standard error (:meth:`tuner.study.record.TrialRecord.rank`). A best that leads clearly is run
again once (:data:`tuner.study.record.WINNER_RUNS`): the figure exported is the mean of its runs
with a spread it measured. What is wanted is read again after each re-run
(:func:`tuner.study.record.remeasures_wanted`): when the re-measured means fall (the best of many
single runs was luckier than its configuration), a trial measured once that is now the best or
close gets the re-runs left.

**Budget.** Re-measures are trials of the ``--trials`` budget: ``--trials 40`` still bounds the
host time. The optimize loop stops searching as soon as the trials left are no more than the
re-measures wanted now plus room for one more trial (the re-runs can read lower and leave a
trial measured once in the lead: it is re-measured too), provided the search has run at least
twice as many (so re-measures take at most a third of the budget); when the re-runs leave
nothing to re-measure before the trials left are spent, the rest search again, but for the
last: a configuration searched last that came out best could not be re-measured, so the last
trial of the budget runs the winner again. A re-run is not
a new Optuna trial: its values are stored on the original trial (the study's ``repeats``
attribute, :mod:`tuner.study.record._spread`), its server logs under ``runs/<study>/repeat-<k>/``,
and the summary counts it (``N run, M re-measured``).

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
from optuna.trial import TrialState

from tuner.failures import FailureClass
from tuner.errors import ServerFailure, TunerError
from tuner.scrub import Scrubber
from tuner.study import record as attrs
from tuner.study.trial import RepeatTrial
from tuner.study.record import (
    CONFIRM_RUNS,
    store_run,
    WINNER_RUNS,
    Noise,
    Remeasure,
    TrialRecord,
    read_view,
    remeasures_wanted,
    winner_lines,
)

if TYPE_CHECKING:
    from tuner.study.loop._progress import ProgressView
    from tuner.study.trial import TrialRunner
    from tuner.space import SearchSpace

__all__ = ["Confirmation"]


# Re-runs kept beyond the re-measures wanted now: one more trial brought close by them.
_ROOM = CONFIRM_RUNS - 1


@dataclass
class Confirmation:
    """The re-measure of the winner, for one ``optimize`` run (see the module docstring)."""

    study: optuna.Study
    space: SearchSpace
    # Only trials this host ran are re-run here (None: any): with several workers on several
    # hosts, each re-measures its own, so runs of one trial come from one host (like for like).
    host: str | None = None

    @property
    def applies(self) -> bool:
        objective = self.space.objective
        return objective.minimize is None and objective.metric != "goodput"

    def wanted(self, *, last: bool = False) -> tuple[list[Remeasure], Noise]:
        """The trials to run again now (none: the winner has its runs), and the study's noise;
        ``last``: for the budget's last trial (see :func:`tuner.study.record.remeasures_wanted`)."""
        view = read_view(self.study)
        if not self.applies:
            return [], view.noise
        wanted = remeasures_wanted(list(view.records), view.noise.relative, last=last)
        if self.host is not None:
            wanted = [r for r in wanted if r.record.user_attrs.get(attrs.HOST) == self.host]
        return wanted, view.noise

    def needed(self, *, last: bool = False) -> int:
        """Re-runs the winner (or the close pair) still needs (0: none)."""
        return sum(r.left for r in self.wanted(last=last)[0])

    def stop_search(self, ran: int, budget: int) -> bool:
        """Whether the loop stops searching to leave the rest of the budget to re-measures: the
        runs wanted now, and room for one more trial measured once (when the re-runs read
        lower, such a trial can become the best or close to it, and is re-measured too). The
        budget's last trial never searches once a stable trial exists and two trials ran (the
        re-measures take at most a third of what ran): one searched last that came out best
        could not be re-measured, so it runs the winner again. Configurations
        queued for this study (the baseline, ``--from-study``, ``--warm-start``, enqueued by
        hand) run first: they were asked for."""
        most = 2 * (CONFIRM_RUNS - 1) + _ROOM
        if budget - ran > most:  # more left than a pair and one more could need: no read
            return False
        if self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return False
        last = budget - ran <= 1
        needed = self.needed(last=last)
        if needed == 0:
            return False
        if last:  # one run of what is wanted, however many more it wants
            reserve = 1
        else:
            reserve = (
                needed + _ROOM if 2 * (needed + _ROOM) <= ran else needed
            )  # no room in a small budget
        return 2 * reserve <= ran and ran + reserve >= budget

    def run(self, runner: TrialRunner, budget: int, progress: ProgressView) -> int:
        """Re-run the winner (or the close pair) within ``budget`` runs; the number of runs made.

        What is wanted is read again after each run: when a re-measured trial's mean falls, a
        trial measured once may become the best or close to it, and the budget left goes to
        that one."""
        if not self.applies:
            return 0
        made = 0
        while made < budget:
            # again after each re-run: the winner may change
            wanted, noise = self.wanted(last=budget - made <= 1)
            if not wanted:
                break
            first = wanted[0]
            record = first.record
            if first.pair is not None and first.runs < CONFIRM_RUNS:
                why = (
                    f"trial {first.pair[0]} leads trial {first.pair[1]} by less than two standard "
                    f"errors of the difference"
                )
            elif first.runs < WINNER_RUNS:
                why = "the best leads clearly but was measured once; it exports a mean"
            else:
                why = "the budget's last trial: a configuration searched last could not be re-measured"
            progress.console.print(
                f"[cyan]re-measuring trial {record.number}[/] (run {first.runs + 1} of "
                f"{first.wanted}): {why} (noise {noise.relative:.1%}, {noise.source})",
                highlight=False,
            )
            if not self._run_again(record, runner, first.runs, progress):
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
        store_run(self.study, record.number, record.value, value, failure, host_seconds, levels)
