"""The one schema of what the tuner stores on trials and studies: every attribute key, named.

Optuna keeps user attributes as JSON. Names are self-explaining so that optuna-dashboard shows
them as they are. Every other module uses the names below (never the strings): a test greps
``tuner/`` and ``bench/`` for string keys outside :mod:`tuner.study.record`.
"""

from __future__ import annotations

__all__ = [
    "CONFIG",
    "CONFIG_KEY",
    "IS_BASELINE",
    "ENQUEUED",
    "RETRY_OF",
    "REUSED_FROM",
    "CHOSEN_BY",
    "MOVE",
    "LEVELS",
    "TELEMETRY",
    "OBSERVATIONS",
    "OBSERVATION_SOURCES",
    "STABLE",
    "BOUND_LEVELS",
    "FAILURE_REASON",
    "FAILURE_DETAIL",
    "FAILURE_EXCERPT",
    "FAILURE_NOTICED_AT",
    "PRUNED_REASON",
    "PRUNED_BY",
    "WORKER",
    "WARM_START_FROM",
    "HOST",
    "EMULATED",
    "COMMAND_LINE",
    "ENV",
    "PATCHES",
    "WARNINGS",
    "RUN_DIR",
    "PATCH_CHECKSUMS",
    "READY_S",
    "HOST_SECONDS",
    "HANDOVER_WAIT_S",
    "LOG_EXCERPT",
    "LOG_FILE",
    "SERVER_LOG_MTIME",
    "ENGINE_VERSION",
    "PROBE_OUTPUTS",
    "NOTE",
    "GOODPUT",
    "VALIDATION",
    "REUSED_ATTRS",
    "KEPT_ON_RETRY",
    "PROBE_REFERENCE",
    "FINGERPRINT",
    "SPACE_FILE",
    "ENGINE",
    "TIME_SCALE",
    "REPEATS",
    "STATED_NOISE",
]

# -- attribute names (user attributes of a trial) ------------------------------------------------
CONFIG = "config"  # dict: the configuration, parameter name -> value (None = unset)
CONFIG_KEY = "config_key"  # str: the configuration's identity, for reuse
IS_BASELINE = "is_baseline"  # bool: the baseline trial (set when it is queued)
ENQUEUED = "enqueued"  # bool: queued by hand, by warm start or by a strategy's proposal
RETRY_OF = "retry_of"  # int: the trial whose worker died; this one runs its configuration again
REUSED_FROM = "reused_from"  # int: identical to this earlier trial, whose result it copies
CHOSEN_BY = "chosen_by"  # str: why this configuration was chosen ("sampler: tpe", "rule: ...")
MOVE = "move"  # dict: the strategy's move that chose it, as data (strategies._moves.Move.to_dict)
LEVELS = "levels"  # list of dicts: each level's metrics (LevelMetrics.to_dict)
TELEMETRY = "telemetry"  # dict: concurrency -> GPU telemetry summary
OBSERVATIONS = (
    "observations"  # dict: name -> number, what the server log, /metrics and telemetry said
)
OBSERVATION_SOURCES = (
    "observation_sources"  # dict: name -> where it was read (tuner.signals.Source value)
)
STABLE = "stable"  # bool: every level ran clean
BOUND_LEVELS = "bound_levels"  # list[int]: levels whose figure is a lower bound (the client under-drove the server)
FAILURE_REASON = "failure_reason"  # str: the FAIL's class ("oom-at-start", "unstable-at-1024")
FAILURE_DETAIL = "failure_detail"  # str: one line on the failure
PRUNED_REASON = "pruned_reason"  # str: why a PRUNED trial was stopped or skipped
PRUNED_BY = "pruned_by"  # str: a PRUNED's class, one of PRUNED_CLASSES (see Outcome)
WORKER = "worker"  # str: host:pid of the tuner that ran it
WARM_START_FROM = "warm_start_from"  # str: "<study>#<trial number>" a warm start queued it from
FAILURE_EXCERPT = "failure_excerpt"  # str: the server log's lines around the failure
FAILURE_NOTICED_AT = (
    "failure_noticed_at"  # where the failure was noticed (ServerFailure.noticed_at)
)
HOST = "host"  # str: the host's name
EMULATED = "emulated"  # bool: ran on the emulated host (also a study attribute)
COMMAND_LINE = "command_line"  # str: the server's command line, secrets masked
ENV = "env"  # dict: the server's environment, secrets masked
PATCHES = "patches"  # list: the source patches applied
WARNINGS = "warnings"  # list: the renderer's warnings on this configuration
RUN_DIR = "run_dir"  # str: the trial's folder on the host
PATCH_CHECKSUMS = "patch_checksums"  # dict: patch name -> checksum of the patched file
READY_S = "ready_s"  # float: host seconds until the server answered
HOST_SECONDS = "host_seconds"  # float: host seconds the trial took
HANDOVER_WAIT_S = "handover_wait_s"  # float: seconds waited for the previous server's GPU memory
LOG_EXCERPT = "log_excerpt"  # str: the server log's last lines
LOG_FILE = "log_file"  # str: the server log copied to this machine
SERVER_LOG_MTIME = "server_log_mtime"  # float: the host log's modification time
ENGINE_VERSION = "engine_version"  # str: the engine's version on the host
PROBE_OUTPUTS = "probe_outputs"  # list: the correctness probe's outputs
NOTE = "note"  # str: a remark on the trial ("under-utilised: ...")
GOODPUT = "goodput_rps"  # float: a goodput trial's highest request rate within the SLO
VALIDATION = (
    "validation"  # dict: ``tuner validate``'s soak result (study attribute, by trial number)
)

# What a trial that reuses an earlier identical one copies from it.
REUSED_ATTRS = (
    LEVELS,
    FAILURE_REASON,
    FAILURE_DETAIL,
    PRUNED_REASON,
    PRUNED_BY,
    STABLE,
    OBSERVATIONS,
    OBSERVATION_SOURCES,
)
# What a configuration queued again (its worker died) keeps of the first attempt.
KEPT_ON_RETRY = (IS_BASELINE, ENQUEUED, CHOSEN_BY, MOVE, WARM_START_FROM)

# -- attribute names of the study ----------------------------------------------------------------
PROBE_REFERENCE = "probe_reference"  # list: the baseline's probe outputs, every probe's reference
FINGERPRINT = (
    "tuner_fingerprint"  # str: the search space's and workload's fingerprint (resume guard)
)
SPACE_FILE = "space_file"  # str: the search-space YAML
ENGINE = "engine"  # str: the engine profile's name
TIME_SCALE = "time_scale"  # float: the emulator's time scale K (1: a real host)
STATED_NOISE = "stated_noise"  # float | None: the search space's objective.noise (the host's run-to-run noise)
REPEATS = "repeats"  # dict: trial number -> re-measured runs, as written before each run had its key (_repeats)
