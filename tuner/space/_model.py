"""The whole search-space file as one pydantic model (the shape; cross-references are checked
in :mod:`tuner.space._checks`)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import field_validator

from tuner.engines import load_profile, profile_names
from tuner.errors import ConfigError
from tuner.space._fit import FitSection
from tuner.space._param_base import LEGACY_SET_SUFFIX
from tuner.space._params import Parameter
from tuner.space._problems import FieldProblem
from tuner.space._sections import (
    ConstraintSection,
    HostSection,
    PatchSection,
    ServerSection,
    Timeouts,
)
from tuner.space._strict import StrictModel
from tuner.space._workload import Objective, Probe, WorkloadSection

__all__ = ["SpaceFile"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SpaceFile(StrictModel):
    """A search-space YAML file, validated field by field."""

    name: str | None = None
    engine: str = "sglang"
    engine_version: str | None = None
    model: str | None = None
    description: str = ""
    host: HostSection | None = None
    server: ServerSection = ServerSection()
    timeouts: Timeouts = Timeouts()
    patches: dict[str, PatchSection] = {}
    parameters: dict[str, Parameter]
    constraints: list[ConstraintSection] = []
    fit: FitSection | None = None
    baseline: dict[str, Any]
    workload: WorkloadSection = WorkloadSection()
    objective: Objective = Objective()
    probe: Probe = Probe()

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.match(value):
            raise FieldProblem(
                f"{value!r} is not a usable study name",
                "use letters, digits, '.', '_' and '-' (e.g. glm5)",
            )
        return value

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str) -> str:
        try:
            load_profile(value)
        except ConfigError:
            raise FieldProblem(
                f"engine {value!r} is unknown", f"use one of {', '.join(profile_names())}"
            ) from None
        return value

    @field_validator("patches")
    @classmethod
    def _patch_names(cls, value: dict[str, PatchSection]) -> dict[str, PatchSection]:
        for name in value:
            if not _PARAM_NAME.match(name):
                raise FieldProblem(
                    f"{name!r} is not a usable patch name", "use letters, digits and _", at=(name,)
                )
        return value

    @field_validator("parameters")
    @classmethod
    def _parameter_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise FieldProblem("no parameters", "declare at least one parameter to search")
        for name in value:
            if not _PARAM_NAME.match(name) or name.endswith(LEGACY_SET_SUFFIX):
                raise FieldProblem(
                    f"{name!r} is not a usable parameter name",
                    f"use letters, digits and _ (not ending in {LEGACY_SET_SUFFIX})",
                    at=(name,),
                )
        return value
