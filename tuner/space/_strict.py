"""The base of every search-space model, and the checks of flag and variable names.

Every model is frozen, strict (no silent ``"8"`` -> ``8``) and refuses unknown keys with a message
that names the allowed ones (and the closest match, for typos).
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from tuner.space._problems import FieldProblem

__all__ = ["StrictModel", "check_flag", "check_env_name", "not_blank", "ENV_REFERENCE"]

_FLAG = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# ${NAME}: a reference to the tuner's own environment, resolved when a command is rendered.
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class StrictModel(BaseModel):
    """Frozen, strict, and explicit about unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = list(cls.model_fields)
            for key in data:
                if key not in allowed:
                    close = difflib.get_close_matches(str(key), allowed, n=1)
                    hint = f"did you mean {close[0]!r}? " if close else ""
                    raise FieldProblem(
                        f"unknown key {key!r}",
                        f"{hint}allowed here: {', '.join(allowed)}",
                        at=(key,),
                    )
        return data


def check_flag(flag: str, at: tuple[str | int, ...] = ()) -> str:
    """A command-line flag name as SGLang spells it (``--max-running-requests``)."""
    if not isinstance(flag, str) or not _FLAG.match(flag):
        raise FieldProblem(
            f"{flag!r} is not a flag name",
            "write the flag alone, as --name (no value, no '=', no spaces)",
            at=at,
        )
    return flag


def check_env_name(name: str, at: tuple[str | int, ...] = ()) -> str:
    """An environment variable name (letters, digits, underscore; not starting with a digit)."""
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise FieldProblem(
            f"{name!r} is not an environment variable name",
            "use letters, digits and _ (e.g. SGLANG_ENABLE_X)",
            at=at,
        )
    return name


def not_blank(fix: str) -> AfterValidator:
    """The check of a text field that must say something: blank text "is empty", with ``fix``
    (``model: Annotated[str, not_blank("give ...")] | None``: a null is not checked)."""

    def check(value: str) -> str:
        if not value.strip():
            raise FieldProblem("is empty", fix)
        return value

    return AfterValidator(check)
