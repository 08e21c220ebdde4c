"""The recheck's runs, each a fresh server start, stored as they finish in a study of their own.

The runs go to ``<study>-recheck-<installed version>`` in the same storage
(:func:`recheck_study_name`): each subject's first run is a trial of that study (its levels, log
and outcome stored as ``tuner optimize`` stores a trial's, ``warm_start_from`` naming the
original ``<study>#<trial>``), and each further run is kept on that trial as a re-measure is
(the study's ``repeats`` attribute, :mod:`tuner.study.record._spread`). Every completed run is
therefore in the storage before the next starts: Ctrl-C loses only the run in progress, and
``tuner recheck`` run again continues where it stopped. ``tuner best``/``trials``/``report``
and optuna-dashboard read that study like any other.

A subject whose configuration failed (a crash at start, under load, wrong output) is not run
again; a failure of the host (``host-error``) stops the recheck.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import optuna

from tuner.errors import ServerFailure, TunerError
from tuner.failures import FailureClass
from tuner.recheck._check import fit_config
from tuner.recheck._plan import Role, Subject, interleaved
from tuner.scrub import Scrubber
from tuner.study.record import (
    CHOSEN_BY,
    COMMAND_LINE,
    CONFIG,
    CONFIG_KEY,
    EMULATED,
    ENQUEUED,
    ENV,
    HOST,
    HOST_SECONDS,
    IS_BASELINE,
    LEVELS,
    PATCHES,
    repeats_of,
    store_run,
    WARM_START_FROM,
    Outcome,
    TrialOutcome,
    TrialRecord,
    read_view,
    scrubbing,
    store,
    write_outcome,
)
from tuner.study.trial import RepeatTrial, TrialRunner, run_outcome

if TYPE_CHECKING:
    from tuner.space import Config, LaunchSpec, SearchSpace

__all__ = ["RecheckRuns", "first_runs", "recheck_study_name", "source_of"]


def recheck_study_name(study: str, version: str | None) -> str:
    """``<study>-recheck-<version>`` (``unknown`` when the version cannot be read)."""
    return f"{study}-recheck-{version or 'unknown'}"


def source_of(study: str, record: TrialRecord) -> str:
    """``<study>#<trial>``: what a recheck trial stores to name the trial it measures again."""
    return f"{study}#{record.number}"


def first_runs(study: optuna.Study, space: SearchSpace) -> dict[str, TrialRecord]:
    """``<old>#<trial>`` -> the trial of the recheck ``study`` of its first run (one that ran, or
    failed by its configuration), from earlier runs of the recheck too."""
    found: dict[str, TrialRecord] = {}
    for record in read_view(study, space).records:
        source = record.user_attrs.get(WARM_START_FROM)
        if source and (record.ran or record.outcome == Outcome.FAILED):
            found.setdefault(str(source), record)
    return found


@dataclass
class RecheckRuns:
    """The runs of one recheck (see the module docstring).

    ``study``: the recheck study; ``old``: the name of the study rechecked; ``runner``: the
    trial runner (its ``study`` is the recheck study: the baseline's probe outputs there are the
    reference on the installed version); ``say``: where one line per run goes.
    """

    study: optuna.Study
    old: str
    space: SearchSpace
    runner: TrialRunner
    say: Callable[[str], None] = lambda line: None

    def done(self) -> dict[str, TrialRecord]:
        """:func:`first_runs` of this recheck's study."""
        return first_runs(self.study, self.space)

    def runs_of(self, record: TrialRecord | None) -> int:
        """How many runs a subject has (its first, completed re-runs and failed ones)."""
        if record is None:
            return 0
        repeats = repeats_of(self.study.user_attrs).get(str(record.number)) or {}
        if not repeats:
            return 1
        return len(repeats.get("values", [])) + len(repeats.get("failed", []))

    def run(self, subjects: list[Subject], runs: int, blocked: set[int]) -> int:
        """Run each subject up to ``runs`` times, interleaved; ``blocked``: trials of the old
        study not to run (the installed engine cannot launch them). Returns the runs made."""
        made = 0
        for round_, subject in interleaved(subjects, runs):
            if subject.record.number in blocked:
                continue
            source = source_of(self.old, subject.record)
            first = self.done().get(source)
            if self.runs_of(first) > round_:
                continue
            if first is not None and first.outcome == Outcome.FAILED:
                continue  # its configuration failed on this version: not again
            self.say(f"recheck run {round_ + 1} of {runs}: {subject.label}")
            if first is None:
                failed_by_host = self._first_run(subject, source)
            else:
                failed_by_host = self._again(subject, first, round_)
            made += 1
            if failed_by_host:
                raise TunerError(
                    f"the host failed during the recheck of {subject.label}: {failed_by_host}; "
                    "fix: `tuner doctor`, then run `tuner recheck` again (finished runs are kept)"
                )
        return made

    def _launch(self, config: Config, number: int, run: int) -> LaunchSpec:
        target = self.runner.target
        return self.space.render(
            config,
            command=target.server_command(number, run),
            port=target.port,
            local=target.local,
        )

    def _first_run(self, subject: Subject, source: str) -> str | None:
        """The subject's first run, a trial of the recheck study; the host's error, if any."""
        config = fit_config(self.space, subject.record.config)
        self.study.enqueue_trial(
            self.space.params_for_enqueue(config),
            user_attrs={
                ENQUEUED: True,
                WARM_START_FROM: source,
                IS_BASELINE: subject.role == Role.BASELINE,
            },
        )
        trial = self.study.ask()
        try:
            config = self.space.suggest(trial)
            store(trial, CONFIG, dict(config))
            store(trial, CONFIG_KEY, config.key())
            store(trial, CHOSEN_BY, f"recheck of {source} ({subject.label})")
            store(trial, HOST, self.runner.target.host.name)
            store(trial, EMULATED, self.runner.target.emulated)
            launch = self._launch(config, trial.number, 0)
            with scrubbing(Scrubber.of(launch.secret_values())):
                store(trial, COMMAND_LINE, launch.command_line)
                store(trial, ENV, launch.masked_env())
                store(trial, PATCHES, sorted(launch.patches))
                result = run_outcome(lambda: self.runner.run(trial, config, launch))
        except KeyboardInterrupt:
            write_outcome(
                self.study,
                trial,
                TrialOutcome.run_failed(FailureClass.INTERRUPTED, "Ctrl-C: runs again next time"),
            )
            raise
        write_outcome(self.study, trial, result)
        shown = (
            f"{result.values[0]:,.4g}"
            if result.values
            else f"{result.state.name} {result.message or ''}"
        )
        self.say(f"  {subject.label}: {shown}")
        return result.message if result.outcome == Outcome.RUN_FAILED else None

    def _again(self, subject: Subject, first: TrialRecord, round_: int) -> str | None:
        """A further run of a subject, kept on its first run's trial; the host's error, if any."""
        config = fit_config(self.space, first.config)
        launch = self._launch(config, first.number, round_)
        runner = copy.copy(self.runner)  # the same runner, its logs under repeat-<k>/
        runner.local_runs_dir = self.runner.local_runs_dir / f"repeat-{round_}"
        trial = RepeatTrial(first.number)
        value = failure = host_error = None
        try:
            with scrubbing(Scrubber.of(launch.secret_values())):
                value = runner.run(trial, config, launch)[0]  # type: ignore[arg-type]  # a RepeatTrial
        except ServerFailure as error:
            failure = error.reason
        except TunerError as error:
            failure = host_error = f"host-error: {error}"
        if host_error is None:
            self._store(
                first,
                value,
                failure,
                trial.user_attrs.get(HOST_SECONDS),
                trial.user_attrs.get(LEVELS) or [],
            )
        self.say(
            f"  {subject.label}: " + (f"{value:,.4g}" if value is not None else f"FAIL {failure}")
        )
        return host_error

    def _store(
        self,
        first: TrialRecord,
        value: float | None,
        failure: str | None,
        host_seconds: float | None,
        levels: list[dict[str, Any]],
    ) -> None:
        """One further run on the first run's trial, in the format of the study's re-measures."""
        store_run(self.study, first.number, first.value, value, failure, host_seconds, levels)
