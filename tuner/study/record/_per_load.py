"""The best stable configuration at each load level (``tuner best --at C``, the report, the summary).

A configuration can win at one load and lose at another (speculative decoding at low
concurrency, DP attention at high; calibration.md's N-off beats the baseline at 256 streams and
loses to it at 64). So the best
is also told per level measured.

**Stable** here means what ``tuner best`` means: a COMPLETE trial whose every level ran clean
(and that did not fail a validation soak). A configuration that crashed or dropped requests at
a higher level is not "the best at 64" for a user who may see that higher load: it is left out,
and when its figure at the level asked beats the winner's, it is named as left out and why
(:attr:`LoadBest.excluded`). Trials pruned below the baseline are not candidates either: the
baseline beat them at every level they measured.

**Runs.** A trial re-measured before the winner was told (:mod:`tuner.study.loop._confirm`)
reads, at each level, the mean of its runs that measured that level clean, and ranks as the
winner does: by that mean less one standard error at the study's run-to-run ``noise``
(:meth:`TrialRecord.rank`). So the best at the top level is the winner, not the run that was
luckiest once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING

from tuner.errors import ConfigError
from optuna.trial import TrialState

from tuner.study.record._keys import EMULATED
from tuner.study.record._figure import figures_by_level
from tuner.study.record._record import TrialRecord
from tuner.study.record._results import records, stable_candidates
from tuner.study.record._spread import rank_of
from tuner.study.record._winner import study_noise

if TYPE_CHECKING:
    import optuna
    from tuner.space import SearchSpace

__all__ = [
    "Excluded",
    "LoadBest",
    "best_at",
    "best_by_load",
    "figure_text",
    "load_contrast",
    "load_summary",
]


@dataclass(frozen=True)
class Excluded:
    """A configuration that read more at the level but is not stable."""

    trial: int
    figure: float
    why: str


@dataclass(frozen=True)
class LoadBest:
    """The best stable trial at one level: its figure there (the mean over its ``runs``), the
    runner-up, what was left out."""

    concurrency: int
    trial: TrialRecord
    figure: float
    runner_up: tuple[TrialRecord, float] | None
    excluded: tuple[Excluded, ...]
    runs: int = 1


def _by_run(
    record: TrialRecord, metric: str, max_failed_fraction: float
) -> dict[int, list[float]]:
    """Each level's clean figures, one per run that measured it clean."""
    figures: dict[int, list[float]] = {}
    for levels in record.runs_levels:  # the study's one rule: a bound counts as its figure
        for concurrency, figure in figures_by_level(levels, metric, max_failed_fraction).items():
            figures.setdefault(concurrency, []).append(figure.value)
    return figures


def _figures(record: TrialRecord, metric: str, max_failed_fraction: float) -> dict[int, float]:
    """Each level's figure: the mean over the runs that measured it clean."""
    return {c: fmean(values) for c, values in _by_run(record, metric, max_failed_fraction).items()}


def _unstable_why(record: TrialRecord) -> str:
    if record.state == TrialState.FAIL:
        return f"failed: {record.reason}" if record.reason else "failed"
    if record.soak_stable is False:
        return "failed its validation soak"
    unclean = sorted(
        {level.concurrency for level in record.levels}
        - set(_figures(record, "output_throughput", 1.0))
    )
    return (
        f"a level ran unclean (c={', '.join(map(str, unclean))})"
        if unclean
        else "a level ran unclean"
    )


def best_at(
    records: Sequence[TrialRecord],
    concurrency: int,
    metric: str = "output_throughput",
    max_failed_fraction: float = 0.01,
    noise: float = 0.0,
) -> LoadBest:
    """The best stable trial at ``concurrency`` by ``metric`` there (see **Runs** in the module
    docstring; ``noise``: the study's relative run-to-run noise).

    Raises:
        ConfigError: no stable trial measured that level (the message lists those measured).
    """
    candidates = [
        (r, runs)
        for r in stable_candidates(records)
        if (runs := _by_run(r, metric, max_failed_fraction).get(concurrency))
    ]
    # ranked as the winner is (TrialRecord.rank): a first run alone does not outrank a mean
    candidates.sort(key=lambda pair: rank_of(fmean(pair[1]), len(pair[1]), noise), reverse=True)
    ranked = [(r, fmean(runs)) for r, runs in candidates]
    if not ranked:
        measured = sorted(
            {
                c
                for r in stable_candidates(records)
                for c in _figures(r, metric, max_failed_fraction)
            }
        )
        raise ConfigError(
            f"--at {concurrency}: no stable trial measured that level; fix: use one of "
            f"{', '.join(map(str, measured)) or '(none yet: run `tuner optimize`)'}"
        )
    best, figure = ranked[0]
    stable = {r.number for r in stable_candidates(records)}
    excluded = tuple(
        Excluded(r.number, f, _unstable_why(r))
        for r in records
        if r.number not in stable
        and r.reused_from is None
        and r.state in (TrialState.COMPLETE, TrialState.FAIL)
        and (f := _figures(r, metric, max_failed_fraction).get(concurrency)) is not None
        and f > figure
    )
    return LoadBest(
        concurrency,
        best,
        figure,
        ranked[1] if len(ranked) > 1 else None,
        excluded,
        len(candidates[0][1]),
    )


def best_by_load(
    records: Sequence[TrialRecord],
    metric: str = "output_throughput",
    max_failed_fraction: float = 0.01,
    noise: float = 0.0,
) -> list[LoadBest]:
    """:func:`best_at` for every level a stable trial measured, by rising concurrency."""
    levels = sorted(
        {c for r in stable_candidates(records) for c in _figures(r, metric, max_failed_fraction)}
    )
    return [best_at(records, c, metric, max_failed_fraction, noise) for c in levels]


def figure_text(found: LoadBest) -> str:
    """The best's figure at its level: ``4,727`` or ``4,727, mean of 3 runs``."""
    return f"{found.figure:,.4g}" + (f", mean of {found.runs} runs" if found.runs > 1 else "")


def load_contrast(
    bests: Sequence[LoadBest],
    metric: str = "output_throughput",
    max_failed_fraction: float = 0.01,
    noise: float = 0.0,
) -> str | None:
    """One line when the best at the lowest level is not the best at the top one, and by how
    much each loses where the other wins (and whether both losses are within ``noise``, the
    relative run-to-run noise); None when one configuration wins both."""
    if len(bests) < 2 or bests[0].trial.number == bests[-1].trial.number:
        return None
    low, top = bests[0], bests[-1]

    losses: list[float] = []

    def loses(winner: LoadBest, other: LoadBest) -> str:
        there = _figures(other.trial, metric, max_failed_fraction).get(winner.concurrency)
        if there is None:
            return f"trial {other.trial.number} did not measure c={winner.concurrency}"
        losses.append((winner.figure - there) / winner.figure)
        return (
            f"trial {other.trial.number} reads {there:,.4g} there "
            f"({(there - winner.figure) / winner.figure:+.1%})"
        )

    text = (
        f"the best at c={low.concurrency} is trial {low.trial.number} ({figure_text(low)}), "
        f"not the best at c={top.concurrency}, trial {top.trial.number} ({figure_text(top)}): "
        f"at c={low.concurrency} {loses(low, top)}; at c={top.concurrency} {loses(top, low)}"
    )
    if len(losses) == 2 and max(losses) <= noise:
        text += f" (both within the run-to-run noise, {noise:.1%}: either serves both loads)"
    return text


def load_summary(study: optuna.Study, space: SearchSpace) -> list[str]:
    """The terminal summary's lines on load: when the best at the lowest level is not the best
    at the top one (nothing for a goodput study, whose levels are rates)."""
    objective = space.objective
    if objective.metric == "goodput":
        return []

    metric = objective.metric
    noise = study_noise(study).relative
    contrast = load_contrast(
        best_by_load(records(study), metric, objective.max_failed_fraction, noise),
        metric,
        objective.max_failed_fraction,
        noise,
    )
    label = " (emulated)" if study.user_attrs.get(EMULATED) else ""
    return (
        [f"[yellow]best by load{label}[/]: {contrast}; see `tuner best --at C`"]
        if contrast
        else []
    )
