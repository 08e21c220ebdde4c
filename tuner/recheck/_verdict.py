"""What a recheck found: per configuration and level then against now, and a verdict a person
can act on. Pure: the subjects, their recheck records and the noise in, lines out.

Figures and spreads come from the record's own functions (:meth:`TrialRecord.spread`,
:meth:`TrialRecord.rank`, :func:`tuner.study.record.spread_of`, :func:`tuner.study.record.tied`),
so the recheck ranks and tells noise as ``tuner optimize`` and ``tuner best`` do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from tuner.recheck._breaks import Break
from tuner.recheck._plan import Role, Subject
from tuner.study.record import ENGINE_VERSION, Spread, TrialRecord, spread_of, tied

__all__ = ["Commands", "Verdict", "VerdictKind", "level_rows", "verdict"]


class VerdictKind(Enum):
    STILL_WINS = "still wins"
    LOST_LEAD = "lost its lead"
    CANNOT_RUN = "can no longer run"


@dataclass(frozen=True)
class Commands:
    """How the next command is written for this study (``space``: the YAML's path, ``study``:
    the rechecked study's name, ``recheck``: the recheck study's name, ``options``: the storage
    and emulate options as typed)."""

    space: str
    study: str
    recheck: str
    options: str = ""

    def run(self, command: str, *rest: str) -> str:
        return " ".join(
            ["tuner", command, self.space, *rest, *([self.options] if self.options else [])]
        )


@dataclass(frozen=True)
class Verdict:
    """``kind``; ``leader``: the subject that leads now (None: none ran); ``lines``: the verdict
    and what to do next."""

    kind: VerdictKind
    leader: Subject | None
    lines: tuple[str, ...]


def _level_spread(
    record: TrialRecord, concurrency: int, metric: str, noise: float
) -> Spread | None:
    """One level's figure over the record's runs (mean and spread, as :func:`spread_of` reads
    a figure over runs)."""
    figures = [
        level.figure(metric)
        for run in record.runs_levels
        for level in run
        if level.concurrency == concurrency and level.stop_reason is None
    ]
    values = [float(f) for f in figures if f is not None]
    return spread_of(None, {"values": values}, noise) if values else None


def _change(now: Spread | None, then: Spread | None) -> str:
    if now is None or then is None or not then.mean:
        return "-"
    return f"{now.mean / then.mean - 1:+.1%}"


def level_rows(
    subject: Subject,
    now: TrialRecord | None,
    metric: str,
    old_noise: float,
    noise: float,
    unit: str,
    breaks: Sequence[Break] = (),
) -> list[str]:
    """One line per level and one for the best: then (version, figure), now (mean +- spread),
    change."""
    then_version = subject.record.user_attrs.get(ENGINE_VERSION) or "unknown"
    levels = sorted(
        {level.concurrency for run in subject.record.runs_levels for level in run}
        | ({level.concurrency for run in now.runs_levels for level in run} if now else set())
    )
    rows = []
    why = _why_not(subject, now, breaks)
    if why is not None:
        rows.append(f"    now: {why}")
    for concurrency in levels:
        then = _level_spread(subject.record, concurrency, metric, old_noise)
        current = _level_spread(now, concurrency, metric, noise) if now is not None else None
        rows.append(
            f"    c={concurrency:<5} then ({then_version}) {then.text(unit) if then else '-':<28} "
            f"now {current.text(unit) if current else '-':<34} change {_change(current, then)}"
        )
    then_best = subject.record.spread(old_noise)
    now_best = now.spread(noise) if now is not None and now.value is not None else None
    rows.append(
        f"    best    then ({then_version}) {then_best.text(unit) if then_best else '-':<28} "
        f"now {now_best.text(unit) if now_best else '-':<34} change {_change(now_best, then_best)}"
    )
    return rows


def _why_not(subject: Subject, now: TrialRecord | None, breaks: Sequence[Break]) -> str | None:
    """Why a subject cannot run on the installed version (None: it ran)."""
    mine = [b for b in breaks if subject.record.number in b.trials]
    if mine:
        return "; ".join(f"{b.kind.value} {b.what} ({b.detail})" for b in mine)
    if now is None:
        return "not run"
    if now.value is None:
        return f"{now.reason or now.state.name}" + (f": {now.detail}" if now.detail else "")
    return None


def _spread_now(now: Mapping[int, TrialRecord | None], subject: Subject, noise: float) -> Spread:
    """The recheck's spread of a subject that ran (the verdict asks only of those)."""
    record = now[subject.record.number]
    assert record is not None
    spread = record.spread(noise)
    assert spread is not None
    return spread


def verdict(
    subjects: Sequence[Subject],
    now: Mapping[int, TrialRecord | None],
    breaks: Sequence[Break],
    noise: float,
    commands: Commands,
    unit: str = "tok/s",
) -> Verdict:
    """The verdict on the winner (see the module docstring); ``now``: old trial number -> its
    recheck record; ``noise``: the recheck's relative run-to-run noise."""
    winner = next((s for s in subjects if s.role == Role.WINNER), subjects[0])
    ran = [s for s in subjects if _why_not(s, now.get(s.record.number), breaks) is None]
    leader = max(ran, key=lambda s: now[s.record.number].rank(noise)) if ran else None  # type: ignore[union-attr]
    found = f"--study-name {commands.study}"
    from_study = commands.run(
        "optimize", f"--from-study {commands.study}", f"--study-name {commands.study}-new"
    )
    why = _why_not(winner, now.get(winner.record.number), breaks)
    if why is not None:
        lines = [f"verdict: the winner CAN NO LONGER RUN: {winner.label}: {why}"]
        if leader is not None:
            best = _spread_now(now, leader, noise)
            lines.append(
                f"  meanwhile the best that runs is {leader.label}: {best.text(unit)}"
                + (
                    f"; to deploy it now: {commands.run('export', found, f'--trial {leader.record.number}', '--out launch.sh')}"
                    if leader.role != Role.BASELINE
                    else " (the baseline: keep today's launch)"
                )
            )
        lines.append(
            f"  next: change the search space for this version (rename or drop what broke), then search "
            f"again from what still holds: {from_study}"
        )
        return Verdict(VerdictKind.CANNOT_RUN, leader, tuple(lines))
    assert leader is not None
    mine = _spread_now(now, winner, noise)
    baseline = next((s for s in subjects if s.role == Role.BASELINE), None)
    notes = [
        f"  not measured: {s.label}: {_why_not(s, now.get(s.record.number), breaks)}"
        for s in subjects
        if s is not winner and _why_not(s, now.get(s.record.number), breaks) is not None
    ]
    then = winner.record.spread(noise)  # its figure then, its spread at least today's noise
    if then is not None and then.mean:
        moved = mine.mean / then.mean - 1
        beyond = not tied(mine, then)
        notes.append(
            f"  the winner reads {moved:+.1%} against its figure then "
            f"({winner.record.user_attrs.get(ENGINE_VERSION) or 'unknown'}: {then.text(unit)}), "
            + ("beyond noise" if beyond else "within noise")
        )
    if leader is winner:
        gain = ""
        base_now = now.get(baseline.record.number) if baseline is not None else None
        if (
            baseline is not None
            and baseline is not winner
            and base_now is not None
            and base_now.value is not None
        ):
            base = _spread_now(now, baseline, noise)
            noise_word = "within noise" if tied(mine, base) else "beyond noise"
            gain = f", {mine.mean / base.mean - 1:+.1%} against the baseline ({noise_word})"
        blocked = [
            s
            for s in subjects
            if s is not winner and s.record.number in {t for b in breaks for t in b.trials}
        ]
        rest = (
            f"; {', '.join(s.label for s in blocked)} could not run: after changing the space for this "
            f"version, {commands.run('recheck', found)} measures {'it' if len(blocked) == 1 else 'them'} too"
            if blocked
            else ""
        )
        return Verdict(
            VerdictKind.STILL_WINS,
            leader,
            (
                f"verdict: the winner STILL WINS: {winner.label}: {mine.text(unit)}{gain}",
                *notes,
                f"  next: the export stands; keep launch.sh{rest}",
            ),
        )
    best = _spread_now(now, leader, noise)
    by = best.mean / mine.mean - 1 if mine.mean else 0.0
    close = tied(best, mine)
    lines = [
        f"verdict: the winner LOST ITS LEAD: {leader.label} leads now with {best.text(unit)}, "
        f"{by:+.1%} against {winner.label} ({mine.text(unit)}), "
        + ("within noise: the order cannot be told" if close else "beyond noise"),
        *notes,
    ]
    if close:
        lines.append(
            f"  next: the export can stay; to tell them apart: {commands.run('recheck', found, '--runs 4')}"
        )
    elif leader.role == Role.BASELINE:
        lines.append(
            f"  next: the tuned launch no longer pays on this version: go back to the baseline's launch, "
            f"and search again: {from_study}"
        )
    else:
        lines.append(
            f"  next: deploy {leader.label}: {commands.run('export', found, f'--trial {leader.record.number}', '--out launch.sh')}; "
            f"or search again from what still holds: {from_study}"
        )
    return Verdict(VerdictKind.LOST_LEAD, leader, tuple(lines))
