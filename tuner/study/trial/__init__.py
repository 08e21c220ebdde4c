"""One trial: the runner on the host (`_runner`: patch, start, probe, measure), what became of it
(`_outcome`), the probe reference, the feasibility gate, the baseline pruner, goodput, the
request source, the target host and the placeholder guard, which values a failure is put down to.
"""

from __future__ import annotations

from tuner.study.trial._runner import (
    LevelRun,
    ObjectiveValue,
    TrialRunner,
    host_seconds,
    objective_value,
    MIN_WALL_TIMEOUT_S,
)
from tuner.study.trial._probe_reference import require_probe_reference, wait_for_probe_reference
from tuner.study.trial._feasibility import (
    FEASIBILITY_PRUNER,
    GATE_EXPLORE,
    GateDecision,
    FeasibilityCheck,
    FeasibilityGate,
    FeasibilityModel,
    failing_values,
    training_label,
)
from tuner.study.trial._pruner import (
    BaselinePruner,
    measurement_order,
    below_baseline,
    clean_values,
    should_prune_against_baseline,
)
from tuner.study.trial._goodput import (
    NO_RATE_MET,
    LevelRunner,
    RateSearch,
    baseline_goodput,
    level_verdict,
    measure_goodput,
    require_baseline_goodput,
)
from tuner.study.trial._traffic import dataset_path, rate_level, request_dialect, request_source
from tuner.study.trial._target import Target, build_target, parse_host_option
from tuner.study.trial._placeholder_host import (
    PLACEHOLDER_ADDRESS,
    is_placeholder,
    refuse_placeholder_host,
)
from tuner.study.trial._blame import Failure, blamed_values, shown
from tuner.study.trial._outcome import outcome_without_running, run_outcome
from tuner.study.trial._repeat import RepeatTrial
from tuner.study.trial import (
    _blame,
    _feasibility,
    _goodput,
    _outcome,
    _placeholder_host,
    _probe_reference,
    _pruner,
    _repeat,
    _runner,
    _target,
    _traffic,
)

__all__ = [  # each module lists its public names once
    *_outcome.__all__,
    *_runner.__all__,
    *_probe_reference.__all__,
    *_feasibility.__all__,
    *_pruner.__all__,
    *_goodput.__all__,
    *_traffic.__all__,
    *_target.__all__,
    *_placeholder_host.__all__,
    *_blame.__all__,
    *_repeat.__all__,
]
