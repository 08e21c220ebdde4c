"""The one place a trial's outcome is decided: skipped by a constraint, skipped by the
feasibility gate, reused from an identical earlier trial, or run (COMPLETE, pruned below the
baseline, FAIL by the server or by the host), each a :class:`TrialOutcome` value that the loop
writes with :func:`tuner.study.record.write_outcome`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import optuna
from optuna.trial import FrozenTrial

from tuner.failures import FailureClass
from tuner.errors import ServerFailure, TunerError
from tuner.study.record import Outcome, TrialOutcome
from tuner.study.trial._feasibility import GateDecision

if TYPE_CHECKING:
    from tuner.space import Config
    from tuner.space import SearchSpace

__all__ = ["outcome_without_running", "run_outcome"]


def outcome_without_running(
    space: SearchSpace,
    config: Config,
    *,
    is_baseline: bool,
    unavailable_patches: set[str] | frozenset[str],
    gate: GateDecision | None,
    earlier: FrozenTrial | None,
) -> TrialOutcome | None:
    """PRUNED by a constraint (or a patch that does not apply on this host), PRUNED by the gate,
    or the result of the identical ``earlier`` trial; None: the configuration is to run."""
    violations = [] if is_baseline else space.constraint_violations(config)
    skips = [v.reason for v in violations if v.action == "skip"]
    if not is_baseline and unavailable_patches:
        needed = unavailable_patches & set(space.render(config, resolve=False).patches)
        skips += [f"patch {name} does not apply on this host" for name in sorted(needed)]
    if skips:
        return TrialOutcome.pruned(Outcome.CONSTRAINT, "constraint: " + "; ".join(skips))
    if gate is not None and gate.skip is not None:
        return TrialOutcome.pruned(Outcome.GATED, gate.skip)
    if earlier is not None:
        return TrialOutcome.reused(earlier)
    return None


def run_outcome(run: Callable[[], list[float]]) -> TrialOutcome:
    """Run the trial: COMPLETE with its values, PRUNED below the baseline (``optuna.TrialPruned``),
    FAIL by the server (:class:`ServerFailure`, its class kept) or by the host (``host-error``:
    the configuration is not to blame)."""
    try:
        return TrialOutcome.complete(run())
    except optuna.TrialPruned as pruned:
        return TrialOutcome.pruned(Outcome.BELOW_BASELINE, str(pruned))
    except ServerFailure as failure:
        return TrialOutcome.server_failed(failure)
    except TunerError as error:
        return TrialOutcome.run_failed(FailureClass.HOST_ERROR, str(error))
