"""Conditions (`when:`): which parameters are active, and which constraints apply.

A condition is a mapping ``parameter -> test``; every entry must hold. A test is a scalar (equal
to), a list (one of), or a mapping of operators ``{eq|ne|in|not_in|lt|le|gt|ge: value}``, all of
which must hold. A test on a parameter that is inactive (absent from the values) never holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator

from tuner.space._problems import FieldProblem, shown

__all__ = ["Clause", "Condition", "OPERATORS", "When", "same_value", "parse_condition"]

OPERATORS = ("eq", "ne", "in", "not_in", "lt", "le", "gt", "ge")
_SYMBOLS = {
    "eq": "==",
    "ne": "!=",
    "in": "in",
    "not_in": "not in",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
}
_ORDERING = {"lt", "le", "gt", "ge"}


def same_value(a: Any, b: Any) -> bool:
    """Equality that keeps ``true`` apart from ``1`` and ``null`` apart from everything else."""
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, str) != isinstance(b, str):
        return False
    return bool(a == b)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Clause:
    """One test: ``param op value`` (``value`` is a tuple for ``in``/``not_in``)."""

    param: str
    op: str
    value: Any

    def holds(self, values: Mapping[str, Any]) -> bool:
        """Whether the test holds; False when ``param`` is not among ``values`` (inactive)."""
        if self.param not in values:
            return False
        actual = values[self.param]
        if self.op == "eq":
            return same_value(actual, self.value)
        if self.op == "ne":
            return not same_value(actual, self.value)
        if self.op in ("in", "not_in"):
            found = any(same_value(actual, v) for v in self.value)
            return found if self.op == "in" else not found
        if not _is_number(actual):
            return False
        return {
            "lt": actual < self.value,
            "le": actual <= self.value,
            "gt": actual > self.value,
            "ge": actual >= self.value,
        }[self.op]

    def values(self) -> tuple[Any, ...]:
        """The values this clause compares with (one, or the members of a list)."""
        return tuple(self.value) if self.op in ("in", "not_in") else (self.value,)

    def __str__(self) -> str:
        if isinstance(self.value, tuple):
            text = "[" + ", ".join(shown(v) for v in self.value) + "]"
        else:
            text = shown(self.value)
        return f"{self.param} {_SYMBOLS[self.op]} {text}"


@dataclass(frozen=True)
class Condition:
    """All clauses of one ``when:``; an empty condition always holds."""

    clauses: tuple[Clause, ...] = ()

    def holds(self, values: Mapping[str, Any]) -> bool:
        """Whether every clause holds for ``values`` (the active parameters so far)."""
        return all(clause.holds(values) for clause in self.clauses)

    def params(self) -> tuple[str, ...]:
        """The parameters this condition reads."""
        return tuple(dict.fromkeys(clause.param for clause in self.clauses))

    def __str__(self) -> str:
        return " and ".join(str(clause) for clause in self.clauses) or "always"


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _parse_test(param: str, test: Any) -> list[Clause]:
    if isinstance(test, list):
        test = {"in": test}
    elif not isinstance(test, dict):
        test = {"eq": test}
    clauses = []
    for op, value in test.items():
        if op not in OPERATORS:
            raise FieldProblem(
                f"unknown operator {op!r}", f"use one of {', '.join(OPERATORS)}", at=(param, op)
            )
        if op in ("in", "not_in"):
            if not isinstance(value, list) or not value or not all(map(_scalar, value)):
                raise FieldProblem(
                    f"{op} needs a non-empty list of values", f"write {op}: [a, b]", at=(param, op)
                )
            value = tuple(value)
        elif op in _ORDERING:
            if not _is_number(value):
                raise FieldProblem(
                    f"{op} needs a number (got {shown(value)})", f"write {op}: 0.9", at=(param, op)
                )
        elif not _scalar(value):
            raise FieldProblem(
                f"{op} needs a single value (got {shown(value)})",
                "compare with one value, or use in: [a, b]",
                at=(param, op),
            )
        clauses.append(Clause(param, op, value))
    if not clauses:
        raise FieldProblem("empty test", "give a value, a list, or {op: value}", at=(param,))
    return clauses


def parse_condition(raw: Any) -> Condition:
    """Parse a ``when:`` mapping; a malformed one raises :class:`FieldProblem`.

    Whether the parameters exist and the values fit them is checked later, against the
    declared parameters (:mod:`tuner.space._checks`).
    """
    if raw is None:
        return Condition()
    if not isinstance(raw, dict) or not raw:
        raise FieldProblem(
            "must be a non-empty mapping of parameter: value",
            "write e.g. `when: {moe_runner_backend: flashinfer_cutlass}`",
        )
    clauses: list[Clause] = []
    for param, test in raw.items():
        clauses.extend(_parse_test(str(param), test))
    return Condition(tuple(clauses))


def _well_formed(raw: dict[str, Any]) -> dict[str, Any]:
    parse_condition(raw)
    return raw


# A ``when:`` field as written, refused when it does not parse (the model keeps the mapping; the
# parsed condition is :func:`parse_condition`'s).
When = Annotated[dict[str, Any], AfterValidator(_well_formed)]
