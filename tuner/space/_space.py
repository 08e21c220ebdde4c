"""The search space: loading, Optuna suggestion, constraints, rendering and fingerprint.

:func:`load_space` validates the YAML once; everything after that works on the frozen
:class:`SearchSpace`, whose methods are the contract the study loop calls.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import optuna
from pydantic import ValidationError

from tuner.engines import EngineProfile, load_profile
from tuner.errors import ConfigError
from tuner.patches import PatchSpec
from tuner.space._checks import check_space, resolve_values
from tuner.space._conditions import Condition
from tuner.space._config import Config, build_config
from tuner.space._fit import layout_of
from tuner.space._launch import (
    LaunchSpec,
    MissingVariable,
    fixed_flag_args,
    is_secret_flag,
    resolve_env,
)
from tuner.space._model import SpaceFile
from tuner.space._param_base import Rendered, value_text
from tuner.space._params import KINDS, Parameter
from tuner.space._problems import FieldPath, FieldProblem, describe_pydantic_error, problem_message
from tuner.space._sections import ConstraintSection, HostSection, ServerSection, Timeouts
from tuner.space._strict import ENV_REFERENCE
from tuner.space._workload import ADDED_DEFAULTS, Objective, Probe, Workload, WorkloadSection
from tuner.space._yaml import YamlDocument, read_yaml

__all__ = ["SearchSpace", "Violation", "load_space"]


@dataclass(frozen=True)
class Violation:
    """A constraint that holds for a configuration: ``skip`` it, or only ``warn``."""

    reason: str
    action: Literal["skip", "warn"]


_T = TypeVar("_T")


class _FromFile(Generic[_T]):
    """A section or value of the space file that the space shows under the same name."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, space: SearchSpace | None, owner: type | None = None) -> _T:
        if space is None:  # read on the class: the descriptor itself, with its doc
            return self  # type: ignore[return-value]
        value: _T = getattr(space.model, self.name)
        return value


@dataclass(frozen=True, eq=False)
class SearchSpace:
    """A validated search space (see ``docs/search-space.md`` for the YAML format)."""

    model: SpaceFile
    path: Path
    profile: EngineProfile
    conditions: Mapping[str, Condition] = field(repr=False)
    baseline: Config
    document: YamlDocument = field(repr=False)

    @property
    def name(self) -> str:
        """The study name: ``name:``, or the file's stem."""
        return self.model.name or self.path.stem

    # The file's own sections and values, read through the space (``space.server`` is
    # ``space.model.server``):
    engine = _FromFile[str]("The engine profile's name (``sglang``).")
    engine_version = _FromFile[str | None]("The engine version expected on the host, if given.")
    host = _FromFile[HostSection | None](
        "The ``host:`` section (None: not given; the CLI decides)."
    )
    server = _FromFile[ServerSection]("The ``server:`` section.")
    timeouts = _FromFile[Timeouts]("The ``timeouts:`` section (host seconds).")
    workload = _FromFile[WorkloadSection](
        "The ``workload:`` section as written (see :meth:`workload_for`)."
    )
    objective = _FromFile[Objective]("The ``objective:`` section.")
    probe = _FromFile[Probe]("The ``probe:`` section.")

    @property
    def parameters(self) -> dict[str, Parameter]:
        """The parameter specifications, in declaration order."""
        return dict(self.model.parameters)

    @property
    def params(self) -> dict[str, Parameter]:
        """The same as :attr:`parameters` (``space.params[name].shape``)."""
        return self.parameters

    @property
    def constraints(self) -> list[ConstraintSection]:
        """The constraints, in file order."""
        return list(self.model.constraints)

    @property
    def patches(self) -> dict[str, PatchSpec]:
        """The declared source patches (package defaulting to the engine's)."""
        return {
            name: PatchSpec(
                name=name,
                package=patch.package or self.profile.package,
                file=patch.file,
                find=patch.find,
                replace=patch.replace,
                description=patch.description,
            )
            for name, patch in self.model.patches.items()
        }

    @property
    def command(self) -> str:
        """The server command: ``server.command``, or the engine profile's default."""
        return self.model.server.command or self.profile.command

    def flags(self) -> list[str]:
        """Every flag this space can put on a command line (for checks against ``--help``)."""
        names = [self.profile.host_flag, self.profile.port_flag, *self.model.server.flags]
        for param in self.model.parameters.values():
            names += param.flags()
        return list(dict.fromkeys(names))

    def _error(self, path: FieldPath, reason: str, fix: str) -> ConfigError:
        line = self.document.line_of(path) if path else None
        return ConfigError(problem_message(self.document.file, line, path, reason, fix))

    def suggest(self, trial: optuna.Trial) -> Config:
        """Sample a configuration through ``trial`` (define-by-run; inactive ones not sampled)."""
        params = self.model.parameters
        return build_config(
            list(params), self.conditions, lambda name: params[name].suggest(trial, name)
        )

    def config(self, values: Mapping[str, Any], *, drop_inactive: bool = False) -> Config:
        """A configuration written as ``parameter: value``, checked like the baseline.

        Args:
            values: the values (``None`` = unset); missing active ones take their ``default:``.
            drop_inactive: leave out values of parameters the others make inactive (e.g. the
                baseline's values with one parameter changed) instead of refusing them.

        Raises:
            ConfigError: a value not allowed, an active parameter missing, an unknown name.
        """
        try:
            return Config(
                resolve_values(
                    self.model,
                    dict(self.conditions),
                    values,
                    ("config",),
                    drop_inactive=drop_inactive,
                )
            )
        except FieldProblem as problem:
            raise ConfigError(
                problem_message(self.document.file, None, problem.at, problem.reason, problem.fix)
            ) from None

    def config_from_params(self, params: Mapping[str, Any]) -> Config:
        """The configuration a trial with these ``trial.params`` ran (the inverse of suggest)."""
        specs = self.model.parameters
        try:
            return build_config(
                list(specs), self.conditions, lambda name: specs[name].decode(name, dict(params))
            )
        except FieldProblem as problem:
            raise ConfigError(
                f"{self.document.file}: trial params {dict(params)!r}: "
                f"{problem.reason}; fix: {problem.fix}"
            ) from None

    def params_for_enqueue(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The Optuna params that make :meth:`suggest` return ``config`` (``enqueue_trial``)."""
        params: dict[str, Any] = {}
        for name, value in config.items():
            params.update(self.model.parameters[name].encode(name, value))
        return params

    def constraint_violations(self, config: Mapping[str, Any]) -> list[Violation]:
        """The constraints that hold for ``config`` (the caller exempts the baseline), then why
        its parallel layout cannot hold the model (``fit:``, each a ``skip``)."""
        found = [
            Violation(c.reason, c.action)
            for c in self.model.constraints
            if c.condition.holds(config)
        ]
        return found + [Violation(problem, "skip") for problem in self.fit_problems(config)]

    def fit_problems(self, config: Mapping[str, Any]) -> list[str]:
        """Why ``config``'s parallel layout cannot hold the model (``fit:``), with the arithmetic."""
        fit = self.model.fit
        if fit is None:
            return []
        rendered = Rendered()
        for name, value in config.items():
            if name in self.model.parameters:
                self.model.parameters[name].render(value, rendered)
        args = fixed_flag_args(self.model.server.flags) + rendered.args
        return fit.problems(layout_of(args, self.profile.parallel_flags))

    def is_baseline(self, config: Mapping[str, Any]) -> bool:
        """Whether ``config`` is the baseline configuration."""
        return Config(config) == self.baseline

    def bind_address(self, local: bool | None = None) -> str:
        """The server's ``--host``: ``server.bind``, else 127.0.0.1, on a local and on a remote
        host alike (over SSH the tuner reaches it through a port forward, so nothing on the
        network reaches its unauthenticated API). ``local`` is accepted for callers that pass it.
        """
        return self.model.server.bind or "127.0.0.1"

    def render(
        self,
        config: Mapping[str, Any],
        *,
        command: str | None = None,
        port: int | None = None,
        local: bool | None = None,
        resolve: bool = True,
    ) -> LaunchSpec:
        """The launch of ``config``.

        Args:
            config: a configuration of this space.
            command: replaces the server command (e.g. the emulator's), split with shlex.
            port: replaces ``server.port``.
            local: whether the server runs on this machine, for the default bind address
                (see :meth:`bind_address`; pass True with ``--emulate`` or ``--host local``).
            resolve: resolve ``${NAME}`` references from the tuner's environment; a missing
                variable is a :class:`ConfigError`. False keeps them as written (dry runs).
        """
        server = self.model.server
        argv = shlex.split(command or self.command)
        if server.model_path is not None:  # the engine's model flag, or its first argument
            model_path = self.model_path(resolve=resolve)
            flag = self.profile.model_flag
            assert model_path is not None  # server.model_path is set
            argv += [flag, model_path] if flag else [model_path]
        argv += [
            self.profile.host_flag,
            self.bind_address(local),
            self.profile.port_flag,
            str(port or server.port),
        ]
        listed = self.profile.secret_flags
        plain = {f: v for f, v in server.flags.items() if not is_secret_flag(f, v, listed)}
        secret_literals = {
            f: v
            for f, v in server.flags.items()
            if is_secret_flag(f, v, listed) and v is not None and v is not False
        }
        secret_templates = {f: value_text(v) for f, v in secret_literals.items()}
        argv += fixed_flag_args(plain)
        rendered = Rendered()
        for name, value in config.items():
            if name not in self.model.parameters:
                raise ConfigError(
                    f"{self.document.file}: configuration: {name!r} is not a "
                    "parameter of this space; fix: build configurations with "
                    "suggest(), config() or config_from_params()"
                )
            self.model.parameters[name].render(value, rendered)
        template = {**server.env, **rendered.env}
        try:
            env = resolve_env(template) if resolve else dict(template)
        except MissingVariable as missing:
            raise self._error(
                ("server", "env", missing.name),
                f"${{{missing.variable}}} is not set in the tuner's environment",
                f"export {missing.variable}=... before running tuner",
            ) from None
        referenced = {f: t for f, t in secret_templates.items() if ENV_REFERENCE.search(t)}
        try:
            # a reference becomes its variable's text; a literal keeps its YAML type (``true``
            # reaches the engine's --config file as a boolean, never as the string "true")
            secrets = {**secret_literals, **(resolve_env(referenced) if resolve else referenced)}
        except MissingVariable as missing:
            raise self._error(
                ("server", "flags", missing.name),
                f"${{{missing.variable}}} is not set in the tuner's environment",
                f"export {missing.variable}=... before running tuner",
            ) from None
        if secrets and not self.profile.config_flag:
            raise self._error(
                ("server", "flags", next(iter(secrets))),
                f"engine {self.profile.name} reads no flags from a file, so this "
                "secret would show on the server's command line",
                "pass it through server.env if the engine reads it from there",
            )
        warnings = [v.reason for v in self.constraint_violations(config) if v.action == "warn"]
        return LaunchSpec(
            argv=argv + rendered.all_args(),
            env=env,
            patches=frozenset(rendered.patches),
            warnings=warnings,
            env_template=template,
            secret_flags=secrets,
            secret_flag_templates=secret_templates,
            api_key=_text_or_none(secrets.get(self.profile.api_key_flag or "")),
        )

    def model_path(self, *, resolve: bool = True) -> str | None:
        """``server.model_path`` with its ``${NAME}`` references read from the tuner's
        environment (``resolve``), or as written; None when not given.

        Raises:
            ConfigError: a referenced variable is not set (naming the line and the fix).
        """
        written = self.model.server.model_path
        if written is None or not resolve:
            return written
        try:
            return resolve_env({"model_path": written})["model_path"]
        except MissingVariable as missing:
            raise self._error(
                ("server", "model_path"),
                f"${{{missing.variable}}} is not set in the tuner's environment",
                f"export {missing.variable}=/path/to/the/model before running tuner",
            ) from None

    def served_model_name(self, *, resolve: bool = True) -> str | None:
        """The model's name in OpenAI requests: ``workload.model``, else ``server.model_path``;
        None: the client asks ``GET /v1/models``."""
        return self.model.workload.model or self.model_path(resolve=resolve)

    def fingerprint(self) -> str:
        """SHA-256 over what makes results comparable: engine, server command, fixed flags and
        environment, patches, parameters, constraints, baseline, workload, objective and probe
        (whose reference outputs come from the baseline's run). Not the host, port, timeouts,
        the host's stated noise (``objective.noise``), name or descriptions; key order in the
        file does not matter."""
        model = self.model
        payload = {
            "engine": model.engine,
            "command": shlex.split(self.command),
            "flags": model.server.flags,
            "env": model.server.env,
            "patches": {
                n: p.model_dump(exclude={"description"}) for n, p in model.patches.items()
            },
            "parameters": {n: _param_payload(p) for n, p in model.parameters.items()},
            "constraints": [c.model_dump() for c in model.constraints],
            "baseline": self.baseline.to_dict(),
            "workload": _without_added_defaults(model.workload.model_dump(), "workload"),
            # the host's stated noise judges a close pair, it changes no measurement
            "objective": _without_added_defaults(
                model.objective.model_dump(exclude={"noise"}), "objective"
            ),
            "probe": model.probe.model_dump(),
        }
        if model.server.model_path is not None:  # left out when absent: older studies resume
            payload["model_path"] = model.server.model_path
        if model.fit is not None:
            payload["fit"] = model.fit.model_dump()
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def workload_for(self, emulate: bool) -> Workload:
        """The workload of a real run, or with ``workload.emulated`` applied (``--emulate``);
        ``api`` defaults to the engine profile's."""
        workload = self.model.workload.resolve(emulate)
        return workload.model_copy(update={"api": workload.api or self.profile.api})


def _param_payload(param: Parameter) -> dict[str, Any]:
    """A parameter as the fingerprint sees it: no description or shape, and no ``json_key``
    when it has none (studies made before the field existed resume)."""
    dump = param.model_dump(exclude={"description", "shape"})
    if dump.get("json_key", "") is None:
        del dump["json_key"]
    return dump


def _text_or_none(value: object) -> str | None:
    """A secret flag's value when it is text (an API key), else None."""
    return value if isinstance(value, str) else None


def load_space(path: str | Path) -> SearchSpace:
    """Read and validate a search-space YAML file.

    Raises:
        ConfigError: one line naming the file (and line), the field, the reason and the fix.
    """
    shown = str(path)
    document = read_yaml(Path(path), shown)
    if not isinstance(document.data, dict):
        raise ConfigError(
            problem_message(
                shown,
                None,
                (),
                "is empty" if document.data is None else "is not a mapping",
                "write `key: value` sections (start from search_spaces/glm5.yaml)",
            )
        )
    try:
        model = SpaceFile.model_validate(document.data)
    except ValidationError as invalid:
        errors = invalid.errors()
        where, reason, fix = describe_pydantic_error(errors[0], KINDS)
        if len(errors) > 1:
            fix += f" ({len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} after this)"
        raise ConfigError(
            problem_message(shown, document.line_of(where), where, reason, fix)
        ) from None
    profile = load_profile(model.engine)
    try:
        conditions, baseline = check_space(model, profile)
    except FieldProblem as problem:
        raise ConfigError(
            problem_message(
                shown, document.line_of(problem.at), problem.at, problem.reason, problem.fix
            )
        ) from None
    return SearchSpace(
        model=model,
        path=Path(path),
        profile=profile,
        conditions=conditions,
        baseline=Config(baseline),
        document=document,
    )


def _without_added_defaults(dump: dict[str, Any], where: str) -> dict[str, Any]:
    """``dump`` without the fields of :data:`ADDED_DEFAULTS` that hold their default."""
    kept = {}
    for key, value in dump.items():
        if isinstance(value, dict) and f"{where}.{key}" in ADDED_DEFAULTS:
            value = _without_added_defaults(value, f"{where}.{key}")
        added = ADDED_DEFAULTS.get(where, {})
        if key in added and value == added[key]:
            continue
        kept[key] = value
    return kept
