"""Learning from crashes: a feasibility model trained on the study's FAIL trials, and its gate.

Optuna's samplers ignore FAIL trials (and ``constraints_func`` is not called for them), so TPE
would happily propose the twin of a configuration that just crashed its server. In the spirit of
SCOOT (``../shared/reference/peers.md``), the tuner keeps its own model of which configurations
fail: a random forest (scikit-learn) over each trial's ``config``, trained on the FAIL trials whose
reason belongs to the configuration (:func:`tuner.study.record.reusable_failure`: not
``interrupted``, ``host-error`` or ``worker-died``) against the ones that ran (COMPLETE, or PRUNED
by the baseline rule). A sampled configuration must pass :class:`FeasibilityGate`; one that does
not is recorded PRUNED (``pruned_by: feasibility``) without host time, which steers TPE away
(TPE ranks PRUNED trials without values with the worst).

A random forest, as SCOOT uses, because the failures of this domain are interactions (graphs off
*and* flashinfer attention *and* a batch of 512 crash) as well as single values (``fa3``). Every
split considers all features (``max_features=None``): on 10-30 random glm5 configurations labelled
by the emulator's performance model that ranked failures best (ROC AUC 0.67/0.81/0.88 at 10/20/30
trials, against 0.65/0.78/0.85 with the square-root default and 0.64/0.74/0.81 for a logistic
regression). 50 trees fit in about 0.1 s.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial

from tuner.space._conditions import same_value
from tuner.study.record import CONFIG, FAILURE_DETAIL, FAILURE_REASON, Outcome, outcome_of
from tuner.study.trial._blame import blamed_values, shown

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = [
    "FEASIBILITY_PRUNER",
    "GATE_EXPLORE",
    "GateDecision",
    "FeasibilityCheck",
    "FeasibilityGate",
    "FeasibilityModel",
    "failing_values",
    "training_label",
]

FEASIBILITY_PRUNER = (
    Outcome.GATED.pruned_by
)  # the ``pruned_by`` of a configuration the gate skipped
# The chance that the gate lets a configuration it would skip run anyway (``tuner optimize``):
# a skipped configuration measures nothing, so without this a gated region could never prove
# the model wrong (a few failures can otherwise fence off a third of a study's proposals).
GATE_EXPLORE = 0.15
_TREES = 50


def training_label(trial: FrozenTrial) -> bool | None:
    """True: it failed by its configuration; False: it ran; None: it says nothing (not run,
    reused from an earlier trial, or failed for a reason outside the configuration)."""
    if CONFIG not in trial.user_attrs:
        return None
    outcome = outcome_of(trial)
    if outcome == Outcome.FAILED:
        return True
    if outcome in (Outcome.COMPLETE, Outcome.BELOW_BASELINE):
        return False
    return None  # not run, reused, or failed for a reason outside the configuration


def _encoder_columns(space: SearchSpace) -> list[tuple[str, Any]]:
    """``(name, spec)`` per feature column: ``None`` the number scaled to [0, 1] (-1 when unset
    or inactive), ``"unset"`` 1 when unset or inactive, ``("is", option)`` one-hot."""
    columns: list[tuple[str, Any]] = []
    for name, param in space.parameters.items():
        if hasattr(param, "low") and hasattr(param, "high"):
            columns += [(name, None), (name, "unset")]
        else:
            columns += [(name, ("is", option)) for option in param.options()]
    return columns


def _scaled(param: Any, value: float) -> float:
    low, high = float(param.low), float(param.high)
    if getattr(param, "log", False):
        return float((np.log(value) - np.log(low)) / (np.log(high) - np.log(low)))
    return (float(value) - low) / (high - low)


@dataclass
class FeasibilityModel:
    """P(a configuration fails its trial), learnt from the configurations run so far.

    Categorical values (``None`` = unset included) are one-hot; numbers are scaled by the space's
    range (log ranges on a log scale), with a column saying "unset or inactive".
    """

    space: SearchSpace
    configs: list[dict[str, Any]] = field(default_factory=list)
    failed: list[bool] = field(default_factory=list)
    numbers: list[int | None] = field(default_factory=list)
    _forest: Any = field(default=None, repr=False)
    _stale: bool = field(default=True, repr=False)

    @classmethod
    def from_study(cls, study: optuna.Study, space: SearchSpace) -> FeasibilityModel:
        """A model trained on every trial of ``study`` that says something (see
        :func:`training_label`)."""
        model = cls(space)
        for trial in study.get_trials(deepcopy=False):
            label = training_label(trial)
            if label is not None:
                model.update(trial.user_attrs[CONFIG], label, trial.number)
        return model

    def update(self, config: Mapping[str, Any], failed: bool, number: int | None = None) -> None:
        """Add one configuration that ran (``failed``: it failed by its configuration)."""
        self.configs.append(dict(config))
        self.failed.append(bool(failed))
        self.numbers.append(number)
        self._stale = True

    def vector(self, config: Mapping[str, Any]) -> np.ndarray:
        """The feature vector of ``config``."""
        params = self.space.parameters
        row = []
        for name, spec in _encoder_columns(self.space):
            value = config.get(name)
            if spec is None:
                row.append(-1.0 if value is None else _scaled(params[name], value))
            elif spec == "unset":
                row.append(1.0 if value is None else 0.0)
            else:
                present = name in config and same_value(value, spec[1])
                row.append(1.0 if present else 0.0)
        return np.asarray(row, dtype=float)

    def p_fail(self, config: Mapping[str, Any]) -> float:
        """The probability that ``config`` fails (0 before any failure, 0.5 before any success)."""
        if not any(self.failed):
            return 0.0
        if all(self.failed):
            return 0.5
        if self._stale:
            self._fit()
        proba = self._forest.predict_proba(self.vector(config)[None, :])[0]
        return float(proba[list(self._forest.classes_).index(True)])

    def similar_failures(self, config: Mapping[str, Any], count: int = 2) -> list[int]:
        """Numbers of the failed trials nearest to ``config`` (L1 over the features)."""
        target = self.vector(config)
        found = [
            (float(np.abs(self.vector(c) - target).sum()), number)
            for c, bad, number in zip(self.configs, self.failed, self.numbers)
            if bad and number is not None
        ]
        return sorted(number for _, number in sorted(found)[:count])

    def _fit(self) -> None:
        from sklearn.ensemble import RandomForestClassifier

        features = np.vstack([self.vector(c) for c in self.configs])
        forest = RandomForestClassifier(
            n_estimators=_TREES, max_features=None, random_state=0, n_jobs=1
        )
        forest.fit(features, np.asarray(self.failed))
        self._forest, self._stale = forest, False


@dataclass
class FeasibilityGate:
    """SCOOT's threshold rule on P(feasible) = 1 - p_fail.

    A configuration passes when ``1 - p_fail >= threshold``. The threshold starts at ``start``,
    rises by ``step`` after each failure (at most ``max``) and falls by ``step`` after
    ``relax_after`` successes in a row (at least ``min``).
    """

    start: float = 0.5
    step: float = 0.05
    max: float = 0.75
    min: float = 0.25
    relax_after: int = 5
    threshold: float = field(init=False)
    successes_in_a_row: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if not 0.0 <= self.min <= self.start <= self.max <= 1.0:
            raise ValueError(
                f"need 0 <= min <= start <= max <= 1, got min={self.min}, "
                f"start={self.start}, max={self.max}"
            )
        self.threshold = self.start

    def allows(self, p_fail: float) -> bool:
        """Whether a configuration with this failure probability may run."""
        return 1.0 - p_fail >= self.threshold - 1e-12

    def record(self, failed: bool) -> None:
        """Move the threshold after a configuration ran."""
        if failed:
            self.threshold = min(self.max, round(self.threshold + self.step, 10))
            self.successes_in_a_row = 0
            return
        self.successes_in_a_row += 1
        if self.successes_in_a_row >= self.relax_after:
            self.threshold = max(self.min, round(self.threshold - self.step, 10))
            self.successes_in_a_row = 0


@dataclass(frozen=True)
class GateDecision:
    """``skip``: why the configuration is not run (None: it runs); ``note``: why it runs although
    the gate doubted it (the trial's ``chosen_by`` says so)."""

    skip: str | None
    note: str | None = None


@dataclass
class FeasibilityCheck:
    """The model and the gate as the optimize loop uses them.

    ``skip_reason(config)`` before a sampled configuration runs (the caller exempts the baseline
    and enqueued configurations); ``record_trial(frozen)`` after it ran. After
    ``max_skips_in_a_row`` skips the next configuration runs anyway, so a pessimistic model
    cannot stall a study.
    """

    model: FeasibilityModel
    gate: FeasibilityGate = field(default_factory=FeasibilityGate)
    max_skips_in_a_row: int = 10
    skips_in_a_row: int = 0
    explore: float = 0.0
    seed: int | None = None
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @classmethod
    def from_study(
        cls,
        study: optuna.Study,
        space: SearchSpace,
        gate: FeasibilityGate | None = None,
        *,
        explore: float = 0.0,
        seed: int | None = None,
    ) -> FeasibilityCheck:
        """Trained on the study so far, with the gate replayed over its trials in order.

        ``explore``: the chance that a configuration the gate would skip runs anyway, to test
        the model where it only guesses (:data:`GATE_EXPLORE` in ``tuner optimize``).
        """
        gate = gate or FeasibilityGate()
        model = FeasibilityModel.from_study(study, space)
        for failed in model.failed:
            gate.record(failed)
        return cls(model, gate, explore=explore, seed=seed)

    def decide(self, config: Mapping[str, Any]) -> GateDecision:
        """Skip the configuration, or run it (with a note when the gate let a doubtful one run
        to test itself)."""
        reason = self.skip_reason(config)
        if reason is None or self.explore <= 0.0 or self._rng.random() >= self.explore:
            return GateDecision(reason)
        self.skips_in_a_row = 0
        return GateDecision(None, f"gate let it run to test itself ({reason})")

    def skip_reason(self, config: Mapping[str, Any]) -> str | None:
        """``feasibility: p_fail=0.83 like failed trials 3, 7``, or None when it may run."""
        p_fail = self.model.p_fail(config)
        if self.gate.allows(p_fail) or self.skips_in_a_row >= self.max_skips_in_a_row:
            self.skips_in_a_row = 0
            return None
        self.skips_in_a_row += 1
        like = ", ".join(str(n) for n in self.model.similar_failures(config))
        return f"{FEASIBILITY_PRUNER}: p_fail={p_fail:.2f} like failed trials {like}"

    def record(self, config: Mapping[str, Any], failed: bool, number: int | None = None) -> None:
        """A configuration ran: teach the model, move the threshold."""
        self.model.update(config, failed, number)
        self.gate.record(failed)

    def record_trial(self, trial: FrozenTrial) -> None:
        """A finished trial: recorded when it says something (:func:`training_label`)."""
        label = training_label(trial)
        if label is not None:
            self.record(trial.user_attrs[CONFIG], label, trial.number)


def failing_values(
    study: optuna.Study, min_failures: int = 3, min_share: float = 0.75
) -> list[str]:
    """Parameter values that keep failing, worst first.

    ``attention_backend=fa3: 4 of 4 trials failed (wrong-output)``: a value (``unset`` for None)
    that at least ``min_failures`` configuration failures are put down to
    (:func:`tuner.study.trial._blame.blamed_values`: what the failure names, else the trial's values
    that fail most often), and that are at least ``min_share`` of the trials that ran with it.
    """
    ran: Counter[tuple[str, str]] = Counter()
    failures: list[tuple[dict[str, Any], str, str]] = []
    for trial in study.get_trials(deepcopy=False):
        label = training_label(trial)
        if label is None:
            continue
        config = trial.user_attrs[CONFIG]
        ran.update((name, shown(value)) for name, value in config.items())
        if label:
            failures.append(
                (
                    config,
                    str(trial.user_attrs.get(FAILURE_DETAIL) or ""),
                    trial.user_attrs.get(FAILURE_REASON) or "unknown",
                )
            )
    failed: Counter[tuple[str, str]] = Counter()
    reasons: dict[tuple[str, str], Counter[str]] = {}
    blamed = blamed_values(ran, ((config, detail) for config, detail, _ in failures))
    for keys, (_, _, reason) in zip(blamed, failures, strict=True):
        for key in keys:
            failed[key] += 1
            reasons.setdefault(key, Counter())[reason] += 1
    found = [
        (failed[key] / ran[key], failed[key], key)
        for key in failed
        if failed[key] >= min_failures and failed[key] / ran[key] >= min_share
    ]
    return [
        f"{name}={value}: {count} of {ran[(name, value)]} trials failed "
        f"({_reasons_text(reasons[(name, value)])})"
        for _, count, (name, value) in sorted(found, key=lambda f: (-f[0], -f[1], f[2]))
    ]


def _reasons_text(counts: Counter[str]) -> str:
    return ", ".join(
        f"{r} x{n}" if n > 1 and len(counts) > 1 else r for r, n in counts.most_common()
    )
