"""The optimize loop: the run from claim to release (`_run`), the loop over trials (`_optimize`),
what the terminal shows (`_progress`), the re-measure of a close best and runner-up (`_confirm`),
the dry run, and the commands that act on a study around it: preflight, warm start, enqueue,
validate (soaks), the host claim.
"""

from __future__ import annotations

from tuner.study.loop._run import (
    OptimizeOptions,
    clear_leftovers,
    run_optimize,
    open_study,
    patch_manager,
    study_directions,
    study_pruner,
)
from tuner.study.loop._optimize import (
    optimize_study,
    OptimizeSummary,
    MAX_IDLE_ASKS,
    local_runs_dir,
)
from tuner.study.loop._progress import ProgressView
from tuner.study.loop._confirm import Confirmation
from tuner.study.loop._dry_run import print_dry_run, estimate_trial_host_seconds
from tuner.study.loop._preflight import (
    check_run_root,
    preflight_checks,
    read_engine_version,
    require_power,
    server_environment,
    unavailable_patches,
    PATCH_CHECK_PREFIX,
)
from tuner.study.loop._host_claim import claim_host, release_host
from tuner.study.loop._warm_start import (
    Candidate,
    storage_url,
    warm_start,
    warm_start_candidates,
)
from tuner.study.loop._enqueue import (
    parse_assignments,
    configuration_with,
    enqueue_configuration,
)
from tuner.study.loop._validate import ValidationResult, validate_study, DEFAULT_SOAK_S
from tuner.study.loop._choosing import ensure_baseline_queued

__all__ = [
    "OptimizeOptions",
    "clear_leftovers",
    "run_optimize",
    "open_study",
    "patch_manager",
    "study_directions",
    "study_pruner",
    "optimize_study",
    "OptimizeSummary",
    "ensure_baseline_queued",
    "MAX_IDLE_ASKS",
    "local_runs_dir",
    "ProgressView",
    "Confirmation",
    "require_power",
    "print_dry_run",
    "estimate_trial_host_seconds",
    "check_run_root",
    "preflight_checks",
    "read_engine_version",
    "server_environment",
    "unavailable_patches",
    "PATCH_CHECK_PREFIX",
    "claim_host",
    "release_host",
    "Candidate",
    "storage_url",
    "warm_start",
    "warm_start_candidates",
    "parse_assignments",
    "configuration_with",
    "enqueue_configuration",
    "ValidationResult",
    "validate_study",
    "DEFAULT_SOAK_S",
]
