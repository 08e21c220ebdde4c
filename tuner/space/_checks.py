"""Checks across sections: references, conditions, duplicate flags, and the baseline.

They run once, after the field-by-field validation of :class:`~tuner.space._model.SpaceFile`,
and raise :class:`~tuner.space._problems.FieldProblem` with the absolute path of the field.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, NamedTuple

from tuner.engines import EngineProfile
from tuner.space._conditions import Clause, Condition
from tuner.space._model import SpaceFile
from tuner.space._param_base import TargetedParam
from tuner.space._params import PatchParam
from tuner.space._problems import FieldPath, FieldProblem

__all__ = ["CheckedSpace", "check_space", "resolve_values"]


def _closest(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def _check_clause(model: SpaceFile, clause: Clause, earlier: list[str], at: FieldPath) -> None:
    if clause.param not in model.parameters:
        allowed = ", ".join(earlier) or "(none)"
        raise FieldProblem(
            f"{clause.param!r} is not a declared parameter",
            f"{_closest(clause.param, earlier)}use one of {allowed}",
            at=at,
        )
    if clause.param not in earlier:
        raise FieldProblem(
            f"refers to {clause.param!r}, which is not declared before it",
            f"conditions read earlier parameters only: move {clause.param!r} above this one",
            at=at,
        )
    reason = model.parameters[clause.param].check_test(clause)
    if reason:
        raise FieldProblem(reason, "compare with a value that parameter can take", at=at)


def _check_conditions(model: SpaceFile) -> dict[str, Condition]:
    names = list(model.parameters)
    conditions: dict[str, Condition] = {}
    for index, (name, param) in enumerate(model.parameters.items()):
        if isinstance(param, PatchParam) and param.patch not in model.patches:
            declared = list(model.patches)
            raise FieldProblem(
                f"patch {param.patch!r} is not declared under patches:",
                f"{_closest(param.patch, declared)}declare it under patches:"
                + (f" or use one of {', '.join(declared)}" if declared else ""),
                at=("parameters", name, "patch"),
            )
        condition = param.condition
        for clause in condition.clauses:
            _check_clause(model, clause, names[:index], ("parameters", name, "when", clause.param))
        conditions[name] = condition
    for index, constraint in enumerate(model.constraints):
        for clause in constraint.condition.clauses:
            _check_clause(model, clause, names, ("constraints", index, "when", clause.param))
    return conditions


def _check_duplicates(model: SpaceFile, profile: EngineProfile) -> None:
    owners: dict[str, str] = {profile.host_flag: "server.bind", profile.port_flag: "server.port"}
    if model.server.model_path is not None and profile.model_flag:
        owners[profile.model_flag] = "server.model_path"
    for flag in model.server.flags:
        if flag in owners:
            raise FieldProblem(
                f"{flag} is set through {owners[flag]}",
                f"remove it here and set {owners[flag]}",
                at=("server", "flags", flag),
            )
        owners[flag] = f"server.flags.{flag}"
    env_owners = {name: f"server.env.{name}" for name in model.server.env}
    json_flags: dict[Any, str] = {}  # a JSON flag, and (flag, key), to the parameter giving it
    for name, param in model.parameters.items():
        for flag in param.flags():
            if isinstance(param, TargetedParam) and param.json_key:  # one key of a JSON argument
                key = (flag, param.json_key)
                if flag not in owners or flag in json_flags:
                    if key in json_flags:
                        raise FieldProblem(
                            f"{flag} key {param.json_key!r} is also given by "
                            f"parameters.{json_flags[key]}",
                            "give each key in one parameter",
                            at=("parameters", name, "json_key"),
                        )
                    json_flags[key] = name
                    json_flags[flag] = name
                    owners[flag] = f"parameters.{name}"
                    continue
            if flag in owners:
                fixed = owners[flag].startswith("server.")
                raise FieldProblem(
                    f"{flag} is also given by {owners[flag]}",
                    "give each flag in one place"
                    + (" (a searched flag cannot also be fixed)" if fixed else ""),
                    at=("parameters", name, "flag"),
                )
            owners[flag] = f"parameters.{name}"
        if isinstance(param, TargetedParam) and param.env:
            if param.env in env_owners:
                raise FieldProblem(
                    f"{param.env} is also set by {env_owners[param.env]}",
                    "set each variable in one place",
                    at=("parameters", name, "env"),
                )
            env_owners[param.env] = f"parameters.{name}"


def resolve_values(
    model: SpaceFile,
    conditions: dict[str, Condition],
    given: Mapping[str, Any],
    where: FieldPath,
    *,
    drop_inactive: bool = False,
) -> dict[str, Any]:
    """Complete and check a configuration written as ``parameter: value`` (like the baseline).

    Active parameters take the given value or their ``default:``; inactive ones must be absent.

    Args:
        model: the validated file.
        conditions: each parameter's parsed ``when:``.
        given: the values as written (``None`` = unset).
        where: the path of ``given`` in the file, for messages (``("baseline",)``).
        drop_inactive: leave out given values of inactive parameters instead of refusing them.
    """
    names = list(model.parameters)
    for key in given:
        if key not in model.parameters:
            raise FieldProblem(
                f"{key!r} is not a declared parameter",
                f"{_closest(key, names)}use the names under parameters:",
                at=(*where, key),
            )
    values: dict[str, Any] = {}
    for name, param in model.parameters.items():
        if not conditions[name].holds(values):
            if name in given and not drop_inactive:
                raise FieldProblem(
                    f"is inactive here ({conditions[name]} is false)",
                    "leave it out, or change the values so that its when: holds",
                    at=(*where, name),
                )
            continue
        if name in given:
            raw, at = given[name], (*where, name)
        elif param.has_default:
            raw, at = param.default, ("parameters", name, "default")
        else:
            raise FieldProblem(
                f"the active parameter {name!r} has no value",
                f"add `{name}: <value>` ({param.options_text()}), or give the "
                "parameter a default:",
                at=where,
            )
        try:
            values[name] = param.check_value(raw)
        except FieldProblem as problem:
            raise FieldProblem(problem.reason, problem.fix, at=at) from None
    return values


class CheckedSpace(NamedTuple):
    """The parsed condition of every parameter, and the baseline's values (active ones only)."""

    conditions: dict[str, Condition]
    baseline: dict[str, Any]


def check_space(model: SpaceFile, profile: EngineProfile) -> CheckedSpace:
    """Check the cross-references of ``model``.

    Returns:
        The parsed condition of every parameter, and the baseline's values (active ones only).
    """
    conditions = _check_conditions(model)
    _check_duplicates(model, profile)
    if model.fit is not None and not profile.parallel_flags:
        raise FieldProblem(
            f"engine {profile.name}'s profile names no parallel flags to read the layout from",
            f"remove fit:, or list parallel_flags in tuner/engines/{profile.name}.yaml",
            at=("fit",),
        )
    return CheckedSpace(
        conditions, resolve_values(model, conditions, model.baseline, ("baseline",))
    )
