"""``guided``: search the way a person tunes by hand, with TPE for what is left.

Each proposal starts from the best configuration so far (the incumbent; the baseline at first)
and changes what the trials say binds, in this order:

1. **rules** from the engine profile (``tuning_rules`` in ``tuner/engines/<engine>.yaml``, data):
   an observation of the incumbent's trial (``#running-req`` at the cap, the KV pool full with
   a growing queue) moves one flag one step (``rule: cap binds at 64 (#running-req = 64 for 93%
   of the level)``). Without observations, a ``shape: saturating`` parameter below the top
   concurrency is raised to it (``rule: cap 2 below the top concurrency 32``);
2. **cliffs**: a ``shape: up_to_failure`` parameter is best just below the value where the
   server runs out of memory, when memory binds. While the best's KV pool is full (token usage
   at least 90% at its top level), the highest value that held and the lowest that failed
   above it form a bracket shared by every configuration; it is bisected, then the incumbent
   moves to the highest value that held (``cliff: mem_fraction_static bracket 0.92-0.95``).
   A pool with room to spare gains nothing from more memory: no trial is spent on the cliff
   (a log that gives no token usage cannot say so: the cliff is probed);
3. **a sweep**: each other parameter's values, one change of the incumbent at a time (a change
   that activates a source patch is tried with the patch applied first: a backend that only
   pays with its patch), each change once; the parameters with a patched value first, then
   those with the fewest values (one trial measures a whole parameter); the profile's
   ``sweep_late`` flags (turning CUDA graphs off, capturing fewer batches: memory for speed)
   after all the others, unless the best's KV pool is full (then memory is the reason to try
   them, right after the patched values); a parameter whose values measured so far all lost at
   least 10% against the best (a backend at 0.5x) waits for the end of the sweep: its other
   values are likely losses too (numbers lie on a curve and keep their place); a value that
   failed at start or answered wrongly and never ran clean is not tried again when it explains
   the failure (the trial's only new value, or it failed twice);
4. **the model**: an additive Bayesian model of the clean trials near the best
   (:mod:`tuner.study.strategies.additive`) pools every measurement of each change; a draw of
   its posterior picks up to three changes of the best it expects to pay (``model: 31 trials
   near the best, expects +3.2%: kv_cache_dtype=bf16, radix_cache=False``). Then the one-changes
   that measured faster are combined, and a second sweep runs from the best;
5. otherwise the sampler draws: TPE that learns from crashes (FAIL trials are infeasible to it,
   see :mod:`tuner.study.strategies.tpe`); with ``explore_every = k`` it also draws every k-th
   trial.

The best the proposals start from is the clean trial near the highest measured one that the
model expects highest: with 2-5% run noise, one lucky figure would otherwise become the best that
every later change is compared with, and real gains of 2-4% would read as losses.

Whatever proposes it, a configuration is not run when it is the incumbent's server again (a value
the start-up log says the unset flag already used: ``value_in_use`` in the engine profile), or
when the additive model is sure it loses at least 5% against the incumbent (two posterior
standard deviations: a backend that measured 0.3x is not run again from every new best).

It reads only what a trial on a real host records (levels, failure class, observations).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna

from tuner.errors import ConfigError
from tuner.study.attrs import Outcome
from tuner.study.strategies._base import Proposal, Strategy
from tuner.study.strategies._values import sweep_values
from tuner.study.strategies.additive import ABSENT, AdditiveFit, fit_additive
from tuner.study.strategies.tpe import CrashAwareTPESampler, tpe_settings
from tuner.study.view import StudyView, TrialRecord

__all__ = ["GuidedStrategy", "GuidedSettings", "cliff_bracket", "top_level_observations"]

# Failures that say a capacity parameter went too far (out of memory at start or under load).
_CAPACITY_FAILURES = ("oom-at-start", "unstable-at-")
# Failures that belong to a value wherever it is used (refused at start, garbage output).
_VALUE_FAILURES = ("startup-crash", "wrong-output")
_SWEEP = "sweep: "


@dataclass(frozen=True)
class GuidedSettings:
    """Knobs of the guided strategy (chosen on generated landscapes 0-49, bench/)."""

    explore_every: int = 0  # every k-th host-run trial is the sampler's (0: only when idle)
    sweep_points: int = 5  # values tried over a numeric range in the sweep
    # a change tried when the best measured was below 1/retry_gain of today's best is stale (the
    # context moved on: a backend that paid since): it may be tried again from the new best
    retry_gain: float = 1.15
    sweep_again: int = 1  # 1: a second sweep from the best once the first is done (0: the sampler)
    # where the additive model's proposals come (tuner.study.strategies.additive): "off", "idle"
    # (when nothing else is left), "before-sweep-again", "before-combine" (after the first
    # sweep), "eager" (also during the sweep, when it expects at least model_eager_gain)
    model: str = "before-combine"
    model_eager_gain: float = 0.02  # "eager": the least gain the model must expect (posterior mean)
    model_draws: int = 40  # posterior draws a proposal is chosen from
    model_changes: int = 3  # changes of the best one model proposal makes at most
    model_radius: int = 4  # trials fitted: those within this many changes of the best
    # the order of the sweep's parameters: "cheap" (values that come with a source patch, in the
    # space's order; then the memory trades when the best's KV pool is full; then the fewest
    # values first: more parameters measured for the trials spent), "space" (as the YAML lists
    # them), "fewest" (a source patch first, then the fewest values)
    sweep_order: str = "cheap"
    # the engine profile's ``sweep_late`` flags (CUDA graphs off, fewer captured batches: memory
    # for speed) in the sweep: 1: after every other parameter unless the best's KV pool is full
    # (token usage >= 90% at its top level: then memory is the reason to try them); 2: after
    # every other parameter always; 0: in the space's order
    sweep_late: int = 1
    # 1: a rule that raised the ``up_to_failure`` parameter itself and ran out of memory under
    # load is not repaired (the cliff's bracket takes that failure); 0: repaired like the others
    repair_own: int = 1
    # "full": an ``up_to_failure`` parameter's cliff is probed only while the best's KV pool is
    # full (token usage >= 90% at its top level: more memory can pay); "always": from the start
    cliff: str = "full"
    # a change the additive model is sure (two standard deviations) loses at least this share,
    # pooled over what was measured near the best, is not run again from a new best (0: off)
    known_loss: float = 0.05
    # the best the proposals start from: the highest "measured" value, or the highest value the
    # additive "model" expects among the clean trials near it (one lucky measurement does not
    # become the best that every later change is compared with)
    incumbent: str = "model"
    # a parameter whose values measured in the sweep all lost at least this share against the
    # best waits for the end of the sweep (its other values are likely losses too: a backend
    # after another backend measured 0.5x); numbers lie on a curve and keep their place (0: off)
    defer_loss: float = 0.1
    # the value a rule lowers a ``saturating`` cap to: half the running batch on the cap's
    # "doubling" values (the same value from every best), or exactly "half" of it (the setting of before)
    lower_to: str = "doubling"
    # 1: a rule's ``lower_to_at_most`` holds (a cap lowered to get back under the CUDA graphs is
    # not proposed above the largest batch they capture); 0: ignored (the setting of before)
    lower_within: int = 1


class GuidedStrategy(Strategy):
    """See the module docstring."""

    name = "guided"

    _fresh: set[str] = frozenset()  # type: ignore[assignment]

    def __init__(
        self,
        space: Any,
        seed: int | None,
        settings: GuidedSettings = GuidedSettings(),
        rules: list[Any] | None = None,
    ) -> None:
        self.space = space
        self.seed = seed
        self.settings = settings
        profile = _profile(space)
        self.rules = list(rules) if rules is not None else list(getattr(profile, "tuning_rules", []))
        self.by_flag = {
            flag: name for name, p in space.parameters.items() for flag in _flags_of(p)
        }
        self.late = {self.by_flag[f] for f in getattr(profile, "sweep_late", []) if f in self.by_flag}
        # parameter -> the observation that says which value the server used while it was unset
        self.in_use = {self.by_flag[f]: seen for f, seen in getattr(profile, "value_in_use", {}).items()
                       if f in self.by_flag}
        self.top = max(space.workload_for(True).levels + space.workload_for(False).levels)

    def sampler(self) -> optuna.samplers.BaseSampler:
        return CrashAwareTPESampler(**tpe_settings(self.seed))

    def propose(self, view: StudyView) -> Proposal | None:
        incumbent = view.best() or view.baseline
        if incumbent is None or not incumbent.config:
            return None
        if self.settings.incumbent == "model":
            incumbent = self._modelled_best(view, incumbent)
        ran = len(view.ran())
        every = self.settings.explore_every
        if every and ran and ran % every == 0:
            return None
        tried = {r.config_key for r in view.records if r.config_key}
        bad = _failing_values(view)
        self._fresh = _fresh_reasons(view, incumbent, self.settings.retry_gain)
        fit = self._fit(view, incumbent)  # once per proposal: the known losses and the model's changes
        for values, reason in self._candidates(view, incumbent, fit):
            try:
                config = self.space.config(values, drop_inactive=True)
            except ConfigError:
                continue
            if config.key() in tried or any(
                v.action == "skip" for v in self.space.constraint_violations(config)
            ):
                continue
            if any((name, _hashable(value)) in bad for name, value in config.items()
                   if incumbent.config.get(name, _MISSING) != value):
                continue
            if self._same_server(config, incumbent) or self._known_loss(fit, config, incumbent):
                continue
            return Proposal(dict(config), reason)
        return None

    def _known_loss(self, fit: AdditiveFit | None, config: Any, inc: TrialRecord) -> bool:
        """Whether the additive model, fitted near the best, is sure ``config`` loses at least
        ``known_loss`` against it (a backend that measured 0.3x of its parent is not run again
        from every new best)."""
        if not self.settings.known_loss or fit is None or fit.rows < 3:
            return False
        effects = fit.changes(dict(config), inc.config)
        return bool(effects) and fit.upper(effects) < math.log1p(-self.settings.known_loss)

    def _same_server(self, config: Any, inc: TrialRecord) -> bool:
        """Whether ``config`` differs from the incumbent's only by naming a value the server
        already used (``--cuda-graph-max-bs 512`` where the unset flag captured up to 512: the
        start-up log said so): the same server again, not worth a start."""
        changed = {k for k in config.keys() | inc.config.keys()
                   if config.get(k, _MISSING) != inc.config.get(k, _MISSING)}
        if not changed or not changed <= self.in_use.keys():
            return False
        seen = top_level_observations(inc.observations)
        return all(
            self.in_use[name] in seen
            and {_hashable(config.get(name)), _hashable(inc.config.get(name))} == {None, seen[self.in_use[name]]}
            for name in changed
        )

    # -- candidates, best first ---------------------------------------------------------------

    def _candidates(self, view: StudyView, inc: TrialRecord,
                    fit: AdditiveFit | None) -> Iterator[tuple[dict[str, Any], str]]:
        yield from self._rule_changes(view, inc)
        yield from self._repairs(view, inc)
        yield from self._cliff_changes(view, inc)
        model = self.settings.model
        if model == "eager":  # during the sweep: a combination the model expects to pay clearly
            yield from self._modelled(view, inc, self.settings.model_eager_gain, fit)
        yield from self._sweep(view, inc)
        if model in ("before-combine", "eager"):
            yield from self._modelled(view, inc, fit=fit)
        yield from self._combined(view, inc)
        if model == "before-sweep-again":
            yield from self._modelled(view, inc, fit=fit)
        if self.settings.sweep_again:
            yield from self._sweep(view, inc, again=True)
        if model == "idle":
            yield from self._modelled(view, inc, fit=fit)

    def _fit(self, view: StudyView, inc: TrialRecord) -> AdditiveFit | None:
        near = [(r.config, r.value) for r in view.complete()
                if r.value and _distance(r.config, inc.config) <= self.settings.model_radius]
        return fit_additive(near, inc.config)

    def _modelled_best(self, view: StudyView, measured: TrialRecord) -> TrialRecord:
        """The clean trial near the measured best whose value the additive model expects highest."""
        fit = self._fit(view, measured)
        if fit is None or fit.rows < 3:
            return measured
        scored = []
        for record in view.complete():
            effects = fit.changes(record.config, measured.config) if record.value else None
            if effects is not None and _distance(record.config, measured.config) <= self.settings.model_radius:
                scored.append((fit.gain(effects), -record.number, record))
        return max(scored, key=lambda item: item[:2])[2] if scored else measured

    def _modelled(self, view: StudyView, inc: TrialRecord, least: float = 0.0,
                  fit: AdditiveFit | None = None) -> Iterator[tuple[dict[str, Any], str]]:
        """Changes of the best that the additive model (fitted to the clean trials near the best)
        draws as gains: each draw of the posterior takes, per parameter, the change with the
        largest drawn gain, and keeps the ``model_changes`` largest (Thompson sampling). A change
        is scored with what it implies (a backend that drops its patch loses the patch's effect).
        ``fit``: the model of the trials near ``inc`` when the caller has it (fitted here otherwise)."""
        fit = fit or self._fit(view, inc)
        if fit is None or fit.rows < 3:
            return
        singles: list[tuple[str, Any, list[int]]] = []
        for name, value in fit.columns:
            if value == ABSENT:
                continue
            try:
                config = dict(self.space.config({**inc.config, name: value}, drop_inactive=True))
            except ConfigError:
                continue
            effects = fit.changes(config, inc.config)
            if effects:
                singles.append((name, value, effects))
        rng = np.random.default_rng([self.seed or 0, len(view.records)])
        for _ in range(self.settings.model_draws):
            sample = fit.draw(rng)
            best: dict[str, tuple[float, Any]] = {}
            for name, value, effects in singles:
                gain = fit.gain(effects, sample)
                if gain > best.get(name, (0.0, None))[0]:
                    best[name] = (gain, value)
            picked = sorted(best.items(), key=lambda item: -item[1][0])[: self.settings.model_changes]
            if not picked:
                continue
            values = {**inc.config, **{name: value for name, (_, value) in picked}}
            try:
                effects = fit.changes(dict(self.space.config(values, drop_inactive=True)), inc.config)
            except ConfigError:
                continue
            if not effects or fit.gain(effects, sample) <= 0 or fit.gain(effects) < least:
                continue
            said = ", ".join(f"{name}={_text(value)}" for name, (_, value) in picked)
            yield values, (f"model: {fit.rows} trials near the best, expects "
                           f"{math.expm1(fit.gain(effects)):+.1%}: {said}")

    def _repairs(self, view: StudyView, inc: TrialRecord) -> Iterator[tuple[dict[str, Any], str]]:
        """A rule's change of the best that ran out of memory under load (``unstable-at-<c>``) is tried
        again with each ``up_to_failure`` parameter lower (two steps, then four, then eight):
        a larger batch needs more headroom than the best's own. A rule that raised such a
        parameter itself is not repaired: that failure places the cliff's bracket."""
        capacity = _capacity_names(self.space)
        for record in reversed(view.failed()):
            reason = record.failure_reason or ""
            if not reason.startswith("unstable-at-") or not record.chosen_by.startswith("rule: "):
                continue
            if self.settings.repair_own and _rule_parameter(record.chosen_by) in capacity:
                continue  # the rule moved the memory itself: the cliff's bracket has that failure
            changed = _changed(record.config, inc.config) - capacity
            if not changed or len(changed) > 2:
                continue  # a probe of the cliff itself, or a change far from the best
            start = {**inc.config, **{k: v for k, v in record.config.items() if k in changed or k not in inc.config}}
            for name, param in self.space.parameters.items():
                current = record.config.get(name)
                if param.shape != "up_to_failure" or current is None:
                    continue
                below = [v for v in _grid(param) if v < current]
                for steps in (2, 4, 8):
                    if len(below) >= steps:
                        yield ({**start, name: below[-steps]},
                                   f"repair: {record.chosen_by.split(':')[0]} of trial {record.number} ran out of memory "
                                   f"under load ({reason}): {name} {_text(current)} -> {_text(below[-steps])}")

    def _combined(self, view: StudyView, inc: TrialRecord) -> Iterator[tuple[dict[str, Any], str]]:
        """The best's configuration with every one-change that measured faster than the
        configuration it changed (small gains hidden by noise add up), the largest first."""
        gains = _one_change_gains(view)
        picked: dict[str, tuple[float, TrialRecord]] = {}
        for (name, _), (gain, record) in gains.items():
            if gain > 1.0 and record.config.get(name, _MISSING) != inc.config.get(name, _MISSING):
                if name not in picked or gain > picked[name][0]:
                    picked[name] = (gain, record)
        ordered = sorted(picked.items(), key=lambda item: -item[1][0])
        for size in sorted({len(ordered), min(2, len(ordered))}, reverse=True):
            if size < 1:
                continue
            values = dict(inc.config)
            for name, (_, record) in ordered[:size]:
                values[name] = record.config[name]
                values.update({k: v for k, v in record.config.items() if k not in inc.config})
            said = ", ".join(f"{n}={_text(r.config[n])} ({g - 1:+.0%})" for n, (g, r) in ordered[:size])
            yield values, f"combine: {said}"
    def _rule_changes(self, view: StudyView, inc: TrialRecord) -> Iterator[tuple[dict[str, Any], str]]:
        seen = top_level_observations(inc.observations)
        for rule in self.rules:
            name = self.by_flag.get(rule.change)
            if name is None or name not in inc.config or not rule.fires(seen):
                continue
            current = inc.config[name]
            saturating = self.space.parameters[name].shape == "saturating"
            if saturating and rule.direction == "raise" and (current is None or current >= self.top):
                continue  # at or above the top concurrency a cap no longer matters
            for value in self._steps(view, name, inc.config[name], rule.direction, seen):
                if self.settings.lower_within and not rule.allows(value, seen):
                    continue  # still above the captured graphs: the other rule raises them
                change = f"{name} {_text(inc.config[name])} -> {_text(value)}"
                if any(_same_change(reason, name, value) for reason in self._fresh):
                    continue  # this change was tried once already (from another best)
                yield {**inc.config, name: value}, f"rule: {_says(rule.says, seen, inc.config[name])}: {change}"
        if "running_req_at_cap_fraction" in seen:
            return
        for name, param in self.space.parameters.items():  # no log to read: the config says it
            value = inc.config.get(name)
            if param.shape == "saturating" and value is not None and value < self.top:
                for raised in self._steps(view, name, value, "raise"):
                    yield {**inc.config, name: raised}, f"rule: cap {value} below the top concurrency {self.top}: {name} {value} -> {_text(raised)}"

    def _steps(self, view: StudyView, name: str, current: Any, direction: str,
               seen: dict[str, float] | None = None) -> list[Any]:
        """The next values of ``name`` from ``current`` in ``direction`` (nearest first)."""
        param = self.space.parameters[name]
        if param.shape == "saturating" and direction == "lower":
            # half the batch that ran: a cap that binds again below where the trouble was
            running = (seen or {}).get("running_req_max", current if current is not None else self.top)
            if self.settings.lower_to == "half":
                below = [v for v in _grid(param) if v <= running // 2 and (current is None or v < current)]
                return below[-1:]
            # ... on the parameter's doublings (967 and 986 running both give 512): the same value
            # from every best, which the model pools and the known losses can then skip
            steps = [v for v in _doublings(param) if current is None or v < current]
            return [min(steps, key=lambda v: abs(math.log(v / max(1.0, running / 2))))] if steps else []
        if param.shape == "up_to_failure":
            low, high, inside = cliff_bracket(view, name, _grid(param))
            return [v for v in inside if current is None or v > current] if direction == "raise" else []
        numbers = sorted(v for v in sweep_values(param, self.settings.sweep_points) if v is not None)
        if param.shape == "saturating" and direction == "raise":
            reach = [v for v in _grid(param) if v >= self.top and (current is None or v > current)]
            return reach[:1] or [v for v in numbers if current is not None and v > current][-1:]
        if current is None:
            middle = numbers[max(0, len(numbers) // 2 - 1)] if direction == "lower" else numbers[-1]
            return [middle]
        if direction == "raise":
            return [v for v in numbers if v > current][:1]
        return [v for v in numbers if v < current][-1:]

    def _cliff_changes(self, view: StudyView, inc: TrialRecord) -> Iterator[tuple[dict[str, Any], str]]:
        if self.settings.cliff == "full" and _room_to_spare(inc):
            return  # more memory cannot pay; a log that gives no token usage cannot say so
        for name, param in self.space.parameters.items():
            if param.shape != "up_to_failure" or name not in inc.config:
                continue
            held, failed, inside = cliff_bracket(view, name, _grid(param), _batch(inc))
            span = _bracket_text(held, failed)
            if inside:
                # bisect a bracket; with no failure yet, the highest value the constraints allow
                probes = [inside[len(inside) // 2]] if failed is not None else inside[::-1]
                for probe in probes:
                    yield {**inc.config, name: probe}, f"cliff: {name} {span}"
            elif held is not None and inc.config[name] is not None and inc.config[name] < held:
                yield {**inc.config, name: held}, f"cliff: {name} at {held:g}, the highest that held ({span})"

    def _sweep(self, view: StudyView, inc: TrialRecord, again: bool = False) -> Iterator[tuple[dict[str, Any], str]]:
        """One change of the best at a time, each change once; ``again``: a new pass from the
        best, counting only the changes measured from this very configuration."""
        done = {r.chosen_by: r for r in view.records if r.chosen_by.startswith(_SWEEP)
                and (not again or _changed(r.config, inc.config) <= {_swept_name(r.chosen_by)})}
        swept = []
        for name, param in self.space.parameters.items():
            if name not in inc.config or param.shape is not None:
                continue
            current = inc.config[name]
            values = [
                v for v in sweep_values(param, self.settings.sweep_points)
                if not (v == current and type(v) is type(current))
                and not (param.kind == "patch" and not v)  # a patch that came with its backend stays
            ]
            changes = [
                (values_, f"{_SWEEP}{name}={_text(value)}" + (f" with patch {patched}" if patched else ""))
                for value in self._ordered(name, values, current, inc, done)
                for values_, patched in self._with_activated(inc.config, name, value)
            ]
            # a value that comes with a source patch first: someone wrote the patch for it
            changes.sort(key=lambda change: " with patch " not in change[1])
            swept.append((any(" with patch " in reason for _, reason in changes), len(values), changes, name))
        full = _pool_full(inc)
        lost = {name for _, _, _, name in swept if self._lost(name, done, inc)}
        if self.settings.sweep_order == "fewest":
            swept.sort(key=lambda item: (not item[0], item[1]))
        elif self.settings.sweep_order == "cheap":
            # patched values (in the space's order), memory trades when memory binds, then the
            # parameters with the fewest values: more parameters measured for the trials spent
            swept.sort(key=lambda item: (0 if item[0] else 1 if full and item[3] in self.late else 2,
                                         0 if item[0] else item[1]))
        if self.settings.sweep_late == 2 or (self.settings.sweep_late == 1 and not full):
            swept.sort(key=lambda item: item[3] in self.late)  # trades made for a reason go last
        swept.sort(key=lambda item: item[3] in lost)
        for _, _, changes, _ in swept:
            yield from ((v, reason) for v, reason in changes if reason not in done)

    def _lost(self, name: str, done: dict[str, TrialRecord], inc: TrialRecord) -> bool:
        """Whether every value of ``name`` measured in this sweep lost at least ``defer_loss``
        against the best (its other values are likely to lose too: they wait for the end)."""
        if not self.settings.defer_loss or not inc.value:
            return False
        if self.space.parameters[name].numeric_options():
            return False  # a number's other values lie on a curve: one loss says little of them
        measured = [r.value for reason, r in done.items() if reason.startswith(f"{_SWEEP}{name}=")
                    and r.value is not None]
        return bool(measured) and all(v < (1 - self.settings.defer_loss) * inc.value for v in measured)

    def _ordered(self, name: str, values: list[Any], current: Any, inc: TrialRecord,
                 done: dict[str, TrialRecord]) -> list[Any]:
        """The values to try, in order. Four or more numbers are searched as one hump: both
        ends and the middle first, then only the neighbours of the best measured so far."""
        numbers = sorted({v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
                         | ({current} if isinstance(current, (int, float)) and not isinstance(current, bool) else set()))
        if len(numbers) < 4:
            return values
        others = [v for v in values if v not in numbers]
        first = [numbers[0], numbers[-1], numbers[len(numbers) // 2]]
        score = {v: _score(done.get(f"{_SWEEP}{name}={_text(v)}")) for v in numbers}
        if current in score:
            score[current] = inc.value or 0.0
        untried = [v for v in first if v != current and score[v] is None]
        if untried:
            return untried + others
        best = max((v for v in numbers if score[v] is not None), key=lambda v: score[v])
        at = numbers.index(best)
        near = [numbers[i] for i in (at - 1, at + 1) if 0 <= i < len(numbers) and numbers[i] != current]
        return [v for v in near if score[v] is None] + others

    def _with_activated(self, start: dict[str, Any], name: str, value: Any) -> Iterator[tuple[dict[str, Any], str]]:
        """The change, with parameters it activates at their default; source patches it
        activates are tried applied first (then not)."""
        params = self.space.parameters
        fill = {n: _natural(p) for n, p in params.items()}
        base = {**fill, **start, name: value}
        patches = [n for n, p in params.items() if n not in start and n != name and p.kind == "patch"]
        try:
            active = self.space.config({**base, **{n: True for n in patches}}, drop_inactive=True)
        except ConfigError:
            active = {}
        activated = [n for n in patches if n in active]
        if activated:
            yield {**base, **{n: True for n in activated}}, ", ".join(activated)
        yield base, ""


_MISSING = object()


def cliff_bracket(view: StudyView, name: str, grid: list[Any], batch: float | None = None) -> tuple[Any, Any, list[Any]]:
    """``(held, failed, inside)`` for an up-to-failure parameter, shared by every configuration:
    the highest value a trial ran clean with, the lowest value above it that ran out of memory
    (at start or under load), and the grid values strictly between them (above ``held`` when
    nothing failed). Failures below a value that held are blamed on something else. With
    ``batch`` (the running batch of the configuration it is for), a value held only in trials
    whose server ran at least that many requests at once: memory that held at 64 running
    requests says nothing of 1,024."""
    held_values = [
        r.config[name] for r in view.records
        if r.outcome in (Outcome.COMPLETE, Outcome.BELOW_BASELINE) and r.config.get(name) is not None
        and (batch is None or _batch(r) is None or _batch(r) >= 0.9 * batch)
    ]
    held = max(held_values) if held_values else None
    failed_values = [
        r.config[name] for r in view.failed()
        if r.config.get(name) is not None
        and (r.failure_reason or "").startswith(_CAPACITY_FAILURES)
        and (held is None or r.config[name] > held)
    ]
    failed = min(failed_values) if failed_values else None
    inside = [
        v for v in grid
        if (held is None or v > held) and (failed is None or v < failed)
    ]
    return held, failed, inside


def _bracket_text(held: Any, failed: Any) -> str:
    """A cliff bracket in words; either end may be unknown (an unset value held no number)."""
    if held is not None and failed is not None:
        return f"bracket {held:g}-{failed:g}"
    if failed is not None:
        return f"below {failed:g}, nothing held yet"
    return f"above {held:g}, no failure yet" if held is not None else "nothing held or failed yet"


def _batch(record: TrialRecord) -> float | None:
    """The most requests the trial's server ran at once, at its top level (None: not logged)."""
    return top_level_observations(record.observations).get("running_req_max")


_FULL_POOL = 0.9  # token usage at which a KV pool counts as full: memory binds


def _token_usage(record: TrialRecord) -> float | None:
    """The KV pool's highest use at the trial's top level (None: the log does not give it)."""
    return top_level_observations(record.observations).get("token_usage_max")


def _pool_full(record: TrialRecord) -> bool:
    """Whether the trial's KV pool was full at its top level (token usage >= 90%): memory binds."""
    return (_token_usage(record) or 0.0) >= _FULL_POOL


def _room_to_spare(record: TrialRecord) -> bool:
    """Whether the trial's log says its KV pool had room at its top level (token usage < 90%);
    False when it says nothing of it (vLLM logs its usage in percent, which is not read)."""
    usage = _token_usage(record)
    return usage is not None and usage < _FULL_POOL


def _capacity_names(space: Any) -> set[str]:
    return {name for name, param in space.parameters.items() if param.shape == "up_to_failure"}


def _rule_parameter(reason: str) -> str:
    """The parameter a rule's reason says it changed (``rule: ...: NAME OLD -> NEW``)."""
    return reason.rpartition(": ")[2].partition(" ")[0]


def _swept_name(reason: str) -> str:
    return reason.removeprefix(_SWEEP).partition("=")[0]


def _distance(a: dict[str, Any], b: dict[str, Any]) -> int:
    """How many parameters two configurations set differently (set in one only counts)."""
    return sum(a.get(k, _MISSING) != b.get(k, _MISSING) for k in a.keys() | b.keys())


def _changed(a: dict[str, Any], b: dict[str, Any]) -> set[str]:
    """The parameters set in both configurations with different values."""
    return {k for k in a.keys() & b.keys() if a[k] != b[k]}


def _one_change_gains(view: StudyView) -> dict[tuple[str, Any], tuple[float, TrialRecord]]:
    """For each sweep trial: its measured value over that of the best earlier configuration it
    changed in its one parameter only (the configuration it was measured against)."""
    gains: dict[tuple[str, Any], tuple[float, TrialRecord]] = {}
    earlier: list[TrialRecord] = []
    for record in view.records:
        if record.outcome == Outcome.COMPLETE and record.value is not None:
            if record.chosen_by.startswith(_SWEEP):
                name = _swept_name(record.chosen_by)
                parents = [p.value for p in earlier if _changed(p.config, record.config) <= {name}
                           and p.config.get(name, _MISSING) != record.config.get(name)]
                if parents:
                    gains[(name, _hashable(record.config.get(name)))] = (record.value / max(parents), record)
            earlier.append(record)
    return gains


def _fresh_reasons(view: StudyView, incumbent: TrialRecord, gain: float) -> set[str]:
    """The reasons of trials chosen while the best measured was within ``gain`` of the
    incumbent's value (a change tried long before a large gain says little of it now)."""
    fresh: set[str] = set()
    best = 0.0
    now = incumbent.value or 0.0
    for record in view.records:
        if record.chosen_by and best * gain >= now:
            fresh.add(record.chosen_by)
        if record.outcome == Outcome.COMPLETE and record.value is not None:
            best = max(best, record.value)
    return fresh


def _failing_values(view: StudyView) -> set[tuple[str, Any]]:
    """(parameter, value) pairs that failed at start or answered wrongly and never ran clean.

    A failure is held against a value only when the value explains it: it was the failed
    trial's one value that never ran clean, or it failed in two such trials. A trial that drew
    two new values at once (fa3 attention with the cutlass MoE) says only that one of them is
    broken: each is then tried once on its own, and the one that fails again is dropped."""
    clean = {(n, _hashable(v)) for r in view.records
             if r.outcome in (Outcome.COMPLETE, Outcome.BELOW_BASELINE) for n, v in r.config.items()}
    failing: set[tuple[str, Any]] = set()
    seen: Counter[tuple[str, Any]] = Counter()
    for record in view.failed():
        if (record.failure_reason or "").startswith(_VALUE_FAILURES):
            unproven = {(n, _hashable(v)) for n, v in record.config.items()} - clean
            seen.update(unproven)
            if len(unproven) == 1:
                failing |= unproven
    return failing | {key for key, count in seen.items() if count >= 2}


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _grid(param: Any) -> list[Any]:
    """Every value of a numeric parameter on its grid (or its sweep values when unbounded)."""
    step = getattr(param, "step", None)
    if hasattr(param, "low") and step:
        count = round((param.high - param.low) / step)
        values = []
        for k in range(count + 1):
            try:
                values.append(param.check_value(param.low + k * step))
            except Exception:  # a float just outside the grid by rounding
                continue
        return values
    numbers = param.numeric_options() if hasattr(param, "numeric_options") else None
    if numbers and not hasattr(param, "low"):
        return sorted(numbers)
    if hasattr(param, "low") and param.kind == "int" and param.high - param.low <= 4096:
        return list(range(param.low, param.high + 1))
    return sorted(v for v in sweep_values(param, 9) if v is not None)


def _doublings(param: Any) -> list[Any]:
    """An integer parameter's values from its low end, doubling (64, 128, ..., 2048); its grid
    when it has no positive integer low end."""
    low, high = getattr(param, "low", None), getattr(param, "high", None)
    if param.kind != "int" or not low or low <= 0:
        return _grid(param)
    values = []
    while low <= high:
        values.append(low)
        low *= 2
    return values


def _natural(param: Any) -> Any:
    if param.has_default:
        return param.default
    if getattr(param, "unset", False):
        return None
    options = sweep_values(param)
    return options[0] if options else None


def _flags_of(param: Any) -> list[str]:
    try:
        return list(param.flags())
    except Exception:  # kinds without a flag (a patch)
        return []


def top_level_observations(observations: dict[str, float]) -> dict[str, float]:
    """The observations of the highest level measured (``name@<c>``), over the unsuffixed ones
    (the KV pool at start, or a host that reports one set per trial)."""
    levels = [int(k.rpartition("@")[2]) for k in observations if k.rpartition("@")[2].isdigit()]
    if not levels:
        return dict(observations)
    top = f"@{max(levels)}"
    return {**observations, **{k.removesuffix(top): v for k, v in observations.items() if k.endswith(top)}}


def _score(record: TrialRecord | None) -> float | None:
    """What a sweep trial measured (0 when it failed; None when there is none)."""
    if record is None:
        return None
    return record.value if record.value is not None else max(record.levels.values(), default=0.0)


def _same_change(reason: str, name: str, value: Any) -> bool:
    """Whether a trial was chosen by a rule that set ``name`` to ``value``."""
    return reason.startswith("rule: ") and f": {name} " in reason and reason.endswith(f"-> {_text(value)}")


def _text(value: Any) -> str:
    return "unset" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _says(template: str, observations: dict[str, float], value: Any) -> str:
    try:
        return template.format(value=value, **observations)
    except (KeyError, ValueError, IndexError):
        return template


def _profile(space: Any) -> Any:
    """The space's engine profile (None when it names no known engine)."""
    from tuner.engines import load_profile

    try:
        return load_profile(space.engine)
    except ConfigError:
        return None
