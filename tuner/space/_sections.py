"""The plain sections of a search space: host, server, timeouts, patches and constraints.

Each is a frozen pydantic model with the YAML's own field names. The workload, objective and probe
are in :mod:`tuner.space._workload`; the parameters in :mod:`tuner.space._params`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from tuner.space._conditions import Condition, When, parse_condition
from tuner.space._problems import FieldProblem
from tuner.space._strict import ENV_REFERENCE, StrictModel, check_env_name, check_flag, not_blank

__all__ = ["HostSection", "ServerSection", "Timeouts", "PatchSection", "ConstraintSection"]

Seconds = float


class HostSection(StrictModel):
    """Where the server runs. ``host: local`` (or ``address: local``) means this machine."""

    address: str = "local"
    user: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    key: str | None = None
    known_hosts: str | None = None
    python: str = "python3"
    run_root: str = "~/.cache/tuner/runs"
    accept_new_host_key: bool = False
    connect_timeout_s: Seconds = Field(default=10.0, gt=0)
    forward: bool | None = (
        None  # SSH port forward to the server (default: unless address is loopback)
    )

    @model_validator(mode="before")
    @classmethod
    def _address_only(cls, data: Any) -> Any:
        return {"address": data} if isinstance(data, str) else data

    @field_validator("address", "python", "run_root")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise FieldProblem("must not be empty", "give a value, or leave the key out")
        return value

    @property
    def is_local(self) -> bool:
        """Whether the server runs on this machine."""
        return self.address == "local"


def _flag_value(flag: str, value: Any) -> Any:
    values = value if isinstance(value, list) else [value]
    for item in values:
        if item is not None and not isinstance(item, (str, int, float, bool)):
            raise FieldProblem(
                f"{item!r} is not a single value",
                "give a string, a number, true (bare flag) or a list",
                at=(flag,),
            )
        if isinstance(value, list) and isinstance(item, bool | None):
            raise FieldProblem(
                "true/false/null cannot be list items",
                "list the values the flag takes",
                at=(flag,),
            )
        if isinstance(item, str) and "${" in ENV_REFERENCE.sub("", item):
            raise FieldProblem(
                f"{item!r} has a malformed reference",
                "write references as ${NAME} (no defaults, no nesting)",
                at=(flag,),
            )
        if isinstance(item, str) and ENV_REFERENCE.search(item) and isinstance(value, list):
            raise FieldProblem(
                "a list value cannot reference the environment",
                "give the secret as a single value: --flag: ${NAME}",
                at=(flag,),
            )
    return value


class ServerSection(StrictModel):
    """How the server is started: command, model, fixed flags, fixed environment, bind address,
    port.

    ``model_path`` is the model to serve, given through the engine profile's ``model_flag``
    (``transformers serve MODEL`` takes it as its argument); ``${NAME}`` in it is read from the
    tuner's environment when a server starts (``${TUNER_MODEL_DIR}``). It also names the model
    in OpenAI requests unless ``workload.model`` does.
    """

    command: (
        Annotated[str, not_blank("leave it out to use the engine's default command")] | None
    ) = None
    stop_command: str | None = None
    bind: str | None = None
    port: int = Field(default=30000, ge=1, le=65535)
    model_path: (
        Annotated[str, not_blank("give the model's path (or ${NAME}), or leave the key out")]
        | None
    ) = None
    flags: dict[str, Any] = {}
    env: dict[str, Any] = {}

    @field_validator("model_path")
    @classmethod
    def _model_path(cls, value: str | None) -> str | None:
        if value is not None and "${" in ENV_REFERENCE.sub("", value):
            raise FieldProblem(
                f"{value!r} has a malformed reference",
                "write references as ${NAME} (no defaults, no nesting)",
            )
        return value

    @field_validator("flags")
    @classmethod
    def _flags(cls, value: dict[str, Any]) -> dict[str, Any]:
        for flag, flag_value in value.items():
            check_flag(flag, at=(flag,))
            _flag_value(flag, flag_value)
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, Any]) -> dict[str, str]:
        texts: dict[str, str] = {}
        for name, raw in value.items():
            check_env_name(name, at=(name,))
            if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
                shown = str(raw).lower() if isinstance(raw, bool) else repr(raw)
                raise FieldProblem(
                    f"{shown} is not a text", f'quote the value: {name}: "1"', at=(name,)
                )
            text = str(raw)
            leftover = ENV_REFERENCE.sub("", text)
            if "${" in leftover:
                raise FieldProblem(
                    f"{text!r} has a malformed reference",
                    "write references as ${NAME} (no defaults, no nesting)",
                    at=(name,),
                )
            texts[name] = text
        return texts


class Timeouts(StrictModel):
    """Host-time limits of each phase of a trial, in seconds."""

    start_s: Seconds = Field(default=600.0, gt=0)
    ready_s: Seconds = Field(default=900.0, gt=0)
    level_s: Seconds = Field(default=900.0, gt=0)
    stop_grace_s: Seconds = Field(default=30.0, gt=0)
    probe_s: Seconds = Field(default=120.0, gt=0)


class PatchSection(StrictModel):
    """A source patch: replace the exact text ``find`` (present once) by ``replace``."""

    package: str | None = None
    file: str
    find: Annotated[str, not_blank("give the exact text to replace, indentation included")]
    replace: str
    description: str = ""

    @field_validator("file")
    @classmethod
    def _relative(cls, value: str) -> str:
        if not value or value.startswith(("/", "~")) or ".." in value.split("/"):
            raise FieldProblem(
                f"{value!r} must be a path inside the package",
                "give it relative to the package, e.g. srt/layers/communicator.py",
            )
        return value

    @model_validator(mode="after")
    def _changes_something(self) -> PatchSection:
        if self.find == self.replace:
            raise FieldProblem(
                "is the same as find", "give the text after the change", at=("replace",)
            )
        if self.find in self.replace:
            raise FieldProblem(
                "contains the whole find text, so an applied patch would look unapplied",
                "make the replacement change the found text itself",
                at=("replace",),
            )
        return self


class ConstraintSection(StrictModel):
    """A known-bad (``skip``) or notable (``warn``) combination, checked before a trial runs."""

    when: When
    action: Literal["skip", "warn"] = "skip"
    reason: Annotated[str, not_blank('say why, e.g. "OOM at start at >= 0.96"')]

    @field_validator("reason")
    @classmethod
    def _one_line(cls, value: str) -> str:
        return " ".join(value.split())

    @property
    def condition(self) -> Condition:
        """The parsed ``when:``."""
        return parse_condition(self.when)
