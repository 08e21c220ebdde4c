"""Command-line arguments shared by the ``tuner`` commands (typer ``Annotated`` types).

They live here, not in :mod:`tuner.cli`, so that command modules of their own
(``tuner/cli_report.py``, ``tuner/cli_bench.py``) need not import the app module.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer

from tuner.loadgen import APIS, ARRIVALS
from tuner.study.strategies import STRATEGIES

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = [
    "AcceptKeyOpt",
    "Api",
    "Arrival",
    "ClientWorkersOpt",
    "EmulateOpt",
    "HostOpt",
    "HostOptions",
    "KeyOpt",
    "KnownHostsOpt",
    "PortOpt",
    "SAMPLER_NAMES",
    "SamplerName",
    "SpaceArg",
    "StrategyName",
    "StorageOpt",
    "StudyOpt",
    "storage_and_name",
    "with_host_options",
]

# The choices an option takes, as enums: ``--help`` lists them and the parser refuses others.
StrategyName = Enum("StrategyName", {name: name for name in STRATEGIES}, type=str)  # type: ignore[misc]
# Optuna's samplers by short name (tuner.study.strategies.SAMPLERS, which imports Optuna: named
# here for a fast --help; tests/cli/test_conventions.py checks that the two agree).
SAMPLER_NAMES = ("tpe", "random", "gp", "cmaes", "qmc", "nsga2", "bruteforce")
SamplerName = Enum(  # type: ignore[misc]
    "SamplerName", {name: name for name in dict.fromkeys((*STRATEGIES, *SAMPLER_NAMES))}, type=str
)
Api = Enum("Api", {name: name for name in APIS}, type=str)  # type: ignore[misc]
Arrival = Enum("Arrival", {name: name for name in ARRIVALS}, type=str)  # type: ignore[misc]

SpaceArg = Annotated[
    Path,
    typer.Argument(
        metavar="SPACE", show_default=False, help="search-space YAML, e.g. search_spaces/glm5.yaml"
    ),
]
StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--storage",
        help="study file (Optuna journal) or database URL, sqlite:///... or postgresql://... "
        "(default studies/<stem>[-emulated].db, a journal file)",
    ),
]
StudyOpt = Annotated[
    str | None, typer.Option("--study-name", help="study name (default: the YAML's name)")
]
EmulateOpt = Annotated[
    bool, typer.Option("--emulate", help="the study run against the emulated GLM-5 host")
]
HostOpt = Annotated[
    str | None, typer.Option("--host", help="[user@]address[:port] or local; overrides the YAML")
]
KeyOpt = Annotated[str | None, typer.Option("--ssh-key", help="private key for SSH")]
KnownHostsOpt = Annotated[
    str | None, typer.Option("--known-hosts", help="known_hosts file (default ~/.ssh/known_hosts)")
]
AcceptKeyOpt = Annotated[
    bool,
    typer.Option("--accept-new-host-key", help="trust an SSH host key seen for the first time"),
]
ClientWorkersOpt = Annotated[
    int,
    typer.Option(
        "--client-workers",
        min=1,
        help="load-generator processes that share each level's streams (use more when a level "
        "is reported measurement-bound)",
    ),
]
PortOpt = Annotated[int | None, typer.Option("--port", help="server port (default: the YAML's)")]


class StudyLocation(NamedTuple):
    """Where a command finds its study: the storage URL and the study's name."""

    url: str
    name: str


def storage_and_name(
    space: SearchSpace, storage: str | None, study_name: str | None, emulate: bool
) -> StudyLocation:
    """The storage URL and study name a command reads: given ones, else the space's defaults.

    An SQLite study at a bare path (the earlier default format) is read as ``sqlite:///``, with a
    one-line note on stderr.
    """
    import sys

    from tuner.study.storage import default_storage_url, resolve_storage

    url, note = resolve_storage(storage or default_storage_url(space.path, emulate))
    if note:
        print(f"tuner: {note}", file=sys.stderr)
    if url.startswith("postgresql"):
        _require_postgres_driver(url)
    return StudyLocation(url, study_name or space.name)


def _require_postgres_driver(url: str) -> None:
    """A PostgreSQL URL needs psycopg2, an optional extra: said before any study or host work."""
    import importlib.util

    if importlib.util.find_spec("psycopg2") is None:
        from tuner.errors import ConfigError

        raise ConfigError(
            f"--storage {url}: PostgreSQL needs psycopg2, not installed here; "
            "fix: pip install -e '.[postgres]'"
        )


@dataclass(frozen=True)
class HostOptions:
    """The host options a command that runs on the host takes: ``--host`` ... ``--port``."""

    host: str | None = None
    ssh_key: str | None = None
    known_hosts: str | None = None
    accept_new_host_key: bool = False
    port: int | None = None

    def target(self, space: SearchSpace, emulate: bool) -> Any:
        """The study's Target for these options (imported late for a fast --help)."""
        from tuner.study.trial import build_target

        return build_target(
            space,
            emulate=emulate,
            host_override=self.host,
            key_path=self.ssh_key,
            known_hosts=self.known_hosts,
            accept_new_host_key=self.accept_new_host_key,
            port=self.port,
        )


_HOST_PARAMETERS = [
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
    for name, annotation, default in (
        ("host", HostOpt, None),
        ("ssh_key", KeyOpt, None),
        ("known_hosts", KnownHostsOpt, None),
        ("accept_new_host_key", AcceptKeyOpt, False),
        ("port", PortOpt, None),
    )
]


def with_host_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Declare the host options once: ``command``'s parameter ``on: HostOptions`` becomes the five
    options, in its place (the same flags, help and order in ``--help``)."""
    signature = inspect.signature(command, eval_str=True)
    parameters = []
    for parameter in signature.parameters.values():
        if parameter.name == "on":
            parameters += _HOST_PARAMETERS
        else:
            parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        on = HostOptions(**{p.name: kwargs.pop(p.name) for p in _HOST_PARAMETERS})
        return command(on=on, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return wrapper
