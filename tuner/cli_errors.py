"""The one form of every command-line mistake: ``tuner: error: <where>: <what>; fix: <how>``.

click finds some mistakes itself (an unknown option, a value outside an enum's choices, a
missing argument); :func:`usage_line` writes them in the project's form, naming the option and
the way to see the command's options. The tuner's own :class:`~tuner.errors.ConfigError`
messages already carry the three parts and are printed as they are (:func:`error_line`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

__all__ = ["did_you_mean", "error_line", "is_usage_error", "usage_line"]

PREFIX = "tuner: error: "


def error_line(message: str) -> str:
    """``message`` as the one line on stderr (inner line breaks folded into spaces)."""
    return PREFIX + " ".join(str(message).split())


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"did you mean --x?"`` for the closest names in ``known``, or ``""``."""
    close = difflib.get_close_matches(name, list(known), n=2, cutoff=0.75)
    return f"did you mean {' or '.join(close)}?" if close else ""


def _choices(param: object) -> tuple[str, ...]:
    """The choices of an enum option (typer's own parameters, or click's ``Choice``)."""
    described = getattr(param, "type_descriptor", None)
    if described is not None and getattr(described, "is_choice", False):
        return tuple(str(getattr(c, "value", c)) for c in described.choices or ())
    choices = getattr(getattr(param, "type", None), "choices", None)
    return tuple(str(getattr(c, "value", c)) for c in choices) if choices else ()


def _kinds(error: Exception) -> set[str]:
    # By name: typer 0.29 carries its own copy of click's exception classes, earlier ones click's.
    return {cls.__name__ for cls in type(error).__mro__}


def is_usage_error(error: Exception) -> bool:
    """A mistake click (or typer's copy of it) found on the command line."""
    return "ClickException" in _kinds(error) and hasattr(error, "exit_code")


def _name(param: object) -> str:
    """An argument's metavar (``SPACE``), an option's long name (``--at``)."""
    if getattr(param, "param_type_name", "") == "argument":
        return str(getattr(param, "metavar", None) or getattr(param, "name", "argument")).upper()
    opts = getattr(param, "opts", None) or ["?"]
    return next((o for o in opts if o.startswith("--")), opts[0])


def usage_line(error: Exception) -> str:
    """The project's one line for a mistake click found on the command line."""
    kinds = _kinds(error)
    ctx = getattr(error, "ctx", None)
    where = getattr(ctx, "command_path", None) or "tuner"
    fix = f"see `{where} -h`"
    what = " ".join(str(getattr(error, "message", error)).split()).rstrip(".")
    what = what.removeprefix("Value error, ")
    param = getattr(error, "param", None)
    if "NoSuchOption" in kinds:
        what = f"no such option {error.option_name}"  # type: ignore[attr-defined]
        possible = getattr(error, "possibilities", None)
        if possible:
            fix = f"did you mean {' or '.join(possible)}? ({fix})"
    elif "MissingParameter" in kinds:
        name = _name(param) if param is not None else "an argument"
        what = f"{name} is missing"
        fix = f"give {name} ({fix})"
    elif "BadParameter" in kinds:
        hint = getattr(error, "param_hint", None)
        if isinstance(hint, (list, tuple)):
            hint = " / ".join(hint)
        where = (
            str(hint).replace("'", "") if hint else (_name(param) if param is not None else where)
        )
        choices = _choices(param)
        if choices:
            value = re.match(r"'(.*)' is not one of", what)
            if value:  # the form of the tuner's own checks: `--strategy annealing: unknown`
                where, what = f"{where} {value.group(1)}", "unknown"
            fix = f"use one of {', '.join(choices)}"
    return error_line(f"{where}: {what}; fix: {fix}")
