"""The coordinator of the ``guided`` strategy: the best to start from, the proposers in order,
and the checks every candidate passes before it runs.

Whatever proposes it, a configuration is not run when it was tried, breaks a ``skip``
constraint, carries a value that failed at start or answered wrongly and never ran clean (when
that value explains the failure), is the incumbent's server again (a value the start-up log says
the unset flag already used: ``value_in_use`` in the engine profile), or is a change the
additive model is sure loses at least ``known_loss`` against the incumbent.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from tuner.errors import ConfigError
from tuner.study.record import Outcome, StudyView, TrialRecord
from tuner.study.strategies._base import Proposal
from tuner.study.strategies._moves import Change
from tuner.study.strategies.guided._capacity import CapacityRetryProposer
from tuner.study.strategies.guided._cliff import CliffProposer, RepairProposer
from tuner.study.strategies.guided._combine import CombineProposer
from tuner.study.strategies.guided._common import (
    MISSING,
    engine_profile,
    flags_of,
    grid,
    hashable,
    top_level_observations,
)
from tuner.study.strategies.guided._model import ModelProposer, fit_near, known_loss, modelled_best
from tuner.study.strategies.guided._proposer import Candidate, Plan, Proposer, Round
from tuner.study.strategies.guided._rules import BUILT_IN_RULES, ProfileRule, Rule, RuleProposer
from tuner.study.strategies.guided._settings import GuidedSettings, ProposerKind
from tuner.study.strategies.guided._sweep import SweepProposer
from tuner.study.strategies.tpe import TpeStrategy

if TYPE_CHECKING:
    from tuner.space import Config
    from tuner.space import SearchSpace

__all__ = ["GuidedStrategy"]


class GuidedStrategy(TpeStrategy):
    """Search the way a person tunes by hand, with TPE for what is left (the sampler of
    :class:`TpeStrategy`: it learns from crashes; with ``explore_every = k`` it also draws every
    k-th trial). ``rules``: the engine profile's ``tuning_rules`` (read from the space's engine
    when None), and any :class:`Rule` of one's own; the built-in rules follow them.

    The proposers are those of ``settings.proposers``, in that order, each made by
    :attr:`proposer_types` (a subclass may map a kind to another proposer)."""

    name = "guided"
    proposer_types: ClassVar[dict[ProposerKind, Callable[[Plan], Proposer]]] = {
        ProposerKind.RULES: RuleProposer,
        ProposerKind.REPAIR: RepairProposer,
        ProposerKind.CAPACITY_RETRY: CapacityRetryProposer,
        ProposerKind.CLIFF: CliffProposer,
        ProposerKind.SWEEP: SweepProposer,
        ProposerKind.MODEL: ModelProposer,
        ProposerKind.COMBINE: CombineProposer,
        ProposerKind.SWEEP_AGAIN: lambda plan: SweepProposer(plan, again=True),
    }

    def __init__(
        self,
        space: SearchSpace,
        seed: int | None,
        settings: GuidedSettings = GuidedSettings(),
        rules: list[Any] | None = None,
    ) -> None:
        super().__init__(space, seed)
        self.settings = settings
        profile = engine_profile(space)
        table = list(rules) if rules is not None else list(getattr(profile, "tuning_rules", []))
        by_flag = {flag: name for name, p in space.parameters.items() for flag in flags_of(p)}
        self.plan = Plan(
            space=space,
            seed=seed,
            settings=settings,
            rules=tuple(r if isinstance(r, Rule) else ProfileRule(r) for r in table)
            + BUILT_IN_RULES,
            by_flag=by_flag,
            late=frozenset(by_flag[f] for f in getattr(profile, "sweep_late", []) if f in by_flag),
            in_use={
                by_flag[f]: seen
                for f, seen in getattr(profile, "value_in_use", {}).items()
                if f in by_flag
            },
            top=max(space.workload_for(True).levels + space.workload_for(False).levels),
            capacity={
                by_flag[f]: prior
                for f, prior in getattr(profile, "capacity", {}).items()
                if f in by_flag
            },
            cap=by_flag.get(getattr(profile, "running_cap_flag", None) or ""),
            last=frozenset(by_flag[f] for f in getattr(profile, "sweep_last", []) if f in by_flag),
            covers=tuple(
                by_flag[f] for f in getattr(profile, "cap_covered_by", []) if f in by_flag
            ),
        )
        self.proposers = tuple(self.proposer_types[kind](self.plan) for kind in settings.proposers)

    def propose(self, view: StudyView) -> Proposal | None:
        settings = self.settings
        incumbent = view.best() or view.baseline
        if incumbent is None or not incumbent.config:
            return None
        incumbent = modelled_best(view, incumbent, settings.model)
        ran = len(view.ran())
        if settings.explore_every and ran and ran % settings.explore_every == 0:
            return None  # the sampler's turn
        tried = {r.config_key for r in view.records if r.config_key}
        bad = _failing_values(view)
        now = Round(
            view, incumbent, fit_near(view, incumbent, settings.model)
        )  # once per proposal
        for candidate in self.candidates(now):
            candidate = self._carry(candidate, incumbent)
            try:
                config = self.space.config(candidate.values, drop_inactive=True)
            except ConfigError:
                continue
            if config.key() in tried or any(
                v.action == "skip" for v in self.space.constraint_violations(config)
            ):
                continue
            if any(
                (name, hashable(value)) in bad
                for name, value in config.items()
                if incumbent.config.get(name, MISSING) != value
            ):
                continue
            if self._same_server(config, incumbent) or known_loss(
                now.fit, config, incumbent, settings.model
            ):
                continue
            return Proposal.of(dict(config), candidate.move)
        return None

    def candidates(self, now: Round) -> Iterator[Candidate]:
        """Every proposer's candidates, in the order of ``settings.proposers``."""
        for proposer in self.proposers:
            yield from proposer.candidates(now)

    def _carry(self, candidate: Candidate, inc: TrialRecord) -> Candidate:
        """The candidate with the parameters that must cover the running batch (the profile's
        ``cap_covered_by``) raised with a cap it raises, up to the batch the levels reach: the
        cap 64 -> 512 with ``--cuda-graph-max-bs 64`` would run every batch above 64 without CUDA
        graphs, a trade the cap's move does not mean. Nothing is carried where the candidate sets
        such a parameter itself, or where it is unset: the engine then picks it with the cap
        (SGLang captures up to its default, never above the running pool, so the log's value in
        use at a cap of 64 is 64 and says nothing of the cap raised)."""
        plan, values = self.plan, candidate.values
        cap = plan.cap
        if cap is None or not plan.covers:
            return candidate
        new, old = values.get(cap), inc.config.get(cap)
        if new is None or old is None or new <= old:
            return candidate
        batch = min(new, plan.top)
        carried = []
        for name in plan.covers:
            current = values.get(name)
            if current is None or current != inc.config.get(name) or current >= batch:
                continue  # unset, the candidate's own value, or it covers the batch already
            higher = sorted(v for v in grid(plan.space.parameters[name]) if v > current)
            if not higher:
                continue
            value = next((v for v in higher if v >= batch), higher[-1])
            carried.append(Change(name, value, current))
        if not carried:
            return candidate
        move = dataclasses.replace(candidate.move, carried=tuple(carried))
        return Candidate({**values, **{c.parameter: c.value for c in carried}}, move)

    def _same_server(self, config: Config, inc: TrialRecord) -> bool:
        """Whether ``config`` differs from the incumbent's only by naming a value the server
        already used (``--cuda-graph-max-bs 512`` where the unset flag captured up to 512: the
        start-up log said so): the same server again, not worth a start."""
        in_use = self.plan.in_use
        different = {
            k
            for k in config.keys() | inc.config.keys()
            if config.get(k, MISSING) != inc.config.get(k, MISSING)
        }
        if not different or not different <= in_use.keys():
            return False
        seen = top_level_observations(inc.observations)
        return all(
            in_use[name] in seen
            and {hashable(config.get(name)), hashable(inc.config.get(name))}
            == {None, seen[in_use[name]]}
            for name in different
        )


def _failing_values(view: StudyView) -> set[tuple[str, Any]]:
    """(parameter, value) pairs that failed at start or answered wrongly and never ran clean.

    A failure is held against a value only when the value explains it: it was the failed
    trial's one value that never ran clean, or it failed in two such trials. A trial that drew
    two new values at once (fa3 attention with the cutlass MoE) says only that one of them is
    broken: each is then tried once on its own, and the one that fails again is dropped."""
    clean = {
        (n, hashable(v))
        for r in view.records
        if r.outcome in (Outcome.COMPLETE, Outcome.BELOW_BASELINE)
        for n, v in r.config.items()
    }
    failing: set[tuple[str, Any]] = set()
    seen: Counter[tuple[str, Any]] = Counter()
    for record in view.failed():
        if record.failure_class is not None and record.failure_class.of_a_value:
            unproven = {(n, hashable(v)) for n, v in record.config.items()} - clean
            seen.update(unproven)
            if len(unproven) == 1:
                failing |= unproven
    return failing | {key for key, count in seen.items() if count >= 2}
