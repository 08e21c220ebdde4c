"""One-line messages for search-space mistakes: file, line, field path, reason and fix.

Validators anywhere in :mod:`tuner.space` raise :class:`FieldProblem` (a ``ValueError``, so that
pydantic collects it like its own errors); :func:`describe_pydantic_error` turns pydantic's error
dictionaries into the same three parts, and :func:`problem_message` joins them into the one line
a :class:`tuner.errors.ConfigError` carries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

__all__ = [
    "ErrorDescription",
    "FieldPath",
    "FieldProblem",
    "describe_pydantic_error",
    "dotted",
    "problem_message",
    "shown",
]

FieldPath = tuple[str | int, ...]

# Generic fixes for pydantic's own error types (the reason comes from pydantic's message).
_FIXES = {
    "missing": "add it",
    "int_type": "give a whole number",
    "int_from_float": "give a whole number",
    "float_type": "give a number",
    "bool_type": "use true or false",
    "string_type": "give a text (quote it in YAML)",
    "dict_type": "give a mapping (`key: value` lines)",
    "list_type": "give a list, e.g. [a, b]",
    "model_type": "give a mapping (`key: value` lines)",
    "model_attributes_type": "give a mapping (`key: value` lines)",
    "greater_than": "use a larger value",
    "greater_than_equal": "use a larger value",
    "less_than": "use a smaller value",
    "less_than_equal": "use a smaller value",
    "too_short": "give at least one entry",
}


class FieldProblem(ValueError):
    """A mistake in the search-space file.

    Args:
        reason: what is wrong, in a few words (``must be below high (4096 >= 2048)``).
        fix: what the user should change (``set low below high``).
        at: the path of the field, relative to where the problem was raised (pydantic adds the
            location of the model being validated in front of it).
    """

    def __init__(self, reason: str, fix: str, at: FieldPath = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix = fix
        self.at = tuple(at)


def dotted(path: FieldPath) -> str:
    """``("constraints", 0, "when")`` as ``constraints[0].when``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def shown(value: Any) -> str:
    """A value as YAML spells it (``true``, ``null``, ``'text'``), cut at 60 characters."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = "null" if value is None else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ErrorDescription(NamedTuple):
    """Where in the file an error is (its field path), what is wrong, and how to fix it."""

    path: FieldPath
    reason: str
    fix: str


def describe_pydantic_error(error: ErrorDetails, kinds: frozenset[str]) -> ErrorDescription:
    """The field path, reason and fix of one error from ``ValidationError.errors()``.

    Args:
        error: one pydantic error dictionary.
        kinds: the parameter ``kind`` tags, which pydantic puts into the location of an error
            inside a discriminated union (``parameters.x.int.low``); they are dropped.
    """
    loc: FieldPath = tuple(error.get("loc", ()))
    if len(loc) >= 3 and loc[0] == "parameters" and loc[2] in kinds:
        loc = loc[:2] + loc[3:]
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    cause = ctx.get("error")
    if isinstance(cause, FieldProblem):
        return ErrorDescription(loc + cause.at, cause.reason, cause.fix)
    message = str(error.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    reason = message[:1].lower() + message[1:]
    if kind == "union_tag_invalid":
        tags = ", ".join(sorted(kinds))
        return ErrorDescription(
            loc + ("kind",), f"kind {ctx.get('tag')!r} is unknown", f"use one of {tags}"
        )
    if kind == "union_tag_not_found":
        tags = ", ".join(sorted(kinds))
        return ErrorDescription(loc, "no `kind:` given", f"add `kind:` with one of {tags}")
    if kind == "literal_error":
        return ErrorDescription(
            loc, f"{shown(error.get('input'))} is not allowed", f"use one of {ctx.get('expected')}"
        )
    if kind == "missing":
        return ErrorDescription(loc, "required but missing", f"add `{loc[-1] if loc else 'it'}:`")
    fix = _FIXES.get(kind, "correct the value")
    if kind in ("int_type", "float_type") and isinstance(error.get("input"), str):
        fix = "write the number without quotes"
        if "e" in error["input"].lower():
            fix += " (YAML 1.1 reads 1e-3 as text: write 1.0e-3)"
    if "input" in error and kind not in ("missing",):
        reason = f"{reason} (got {shown(error['input'])})"
    return ErrorDescription(loc, reason, fix)


def problem_message(file: str, line: int | None, path: FieldPath, reason: str, fix: str) -> str:
    """The one-line message: ``file:line: field.path: reason; fix: fix``."""
    where = f"{file}:{line}" if line else file
    field = dotted(path)
    text = f"{where}: {field}: {reason}; fix: {fix}" if field else f"{where}: {reason}; fix: {fix}"
    return text.replace("\r", " ").replace("\n", " ")
