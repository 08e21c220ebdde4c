"""The search space: its YAML file, pydantic model, Optuna mapping and command-line rendering.

Load a file once with :func:`load_space`; a mistake is a one-line
:class:`tuner.errors.ConfigError` naming the file, line, field and fix. The
:class:`SearchSpace` then samples configurations (:meth:`SearchSpace.suggest`), knows the
baseline, checks constraints and renders a :class:`LaunchSpec` for each :class:`Config`.
The YAML format is described in ``docs/search-space.md``.
"""

from tuner.patches import PatchSpec
from tuner.space._config import Config
from tuner.space._launch import MASK, LaunchSpec, is_secret_name
from tuner.space._param_base import LEGACY_SET_SUFFIX, SET_SUFFIX
from tuner.space._params import (
    BoolParam,
    CategoricalParam,
    FloatParam,
    IntParam,
    PairedParam,
    PatchParam,
    StoreTrueParam,
)
from tuner.space._sections import ConstraintSection, HostSection, ServerSection, Timeouts
from tuner.space._space import SearchSpace, Violation, load_space
from tuner.space._workload import Objective, Probe, Workload, WorkloadSection

__all__ = [
    "load_space",
    "SearchSpace",
    "Config",
    "LaunchSpec",
    "Violation",
    "PatchSpec",
    "MASK",
    "LEGACY_SET_SUFFIX",
    "SET_SUFFIX",
    "is_secret_name",
    "HostSection",
    "ServerSection",
    "Timeouts",
    "ConstraintSection",
    "Workload",
    "WorkloadSection",
    "Objective",
    "Probe",
    "CategoricalParam",
    "IntParam",
    "FloatParam",
    "StoreTrueParam",
    "BoolParam",
    "PairedParam",
    "PatchParam",
]
