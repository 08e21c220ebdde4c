"""The configurations worth rendering of a search space (each parameter at each of its values)
and their command lines without the server command: what the real SGLang parser checks."""

from __future__ import annotations

import shlex
from typing import Any

import optuna

from tuner.space import Config, SearchSpace

__all__ = ["configurations", "server_flags", "values_of"]


def values_of(param: Any) -> list[Any]:
    """The values worth trying: each option, or both ends of a range (and unset)."""
    if hasattr(param, "low") and hasattr(param, "high"):
        return [param.low, param.high] + ([None] if getattr(param, "unset", False) else [])
    return list(param.options())


def configurations(space: SearchSpace) -> list[tuple[str, Config]]:
    """The baseline, then for each parameter and each of its values a configuration where the
    parameter is active with that value (the baseline changed, or a sampled one where the
    baseline makes the parameter inactive)."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    sampled = [space.suggest(study.ask()) for _ in range(200)]
    found = [("baseline", space.baseline)]
    for name, param in space.parameters.items():
        base = space.baseline if name in space.baseline else next(
            (c for c in sampled if name in c), None)
        assert base is not None, f"{name}: never active in 200 sampled configurations"
        filler = {other: values_of(spec)[0] for other, spec in space.parameters.items()}
        for value in values_of(param):  # a parameter it turns on takes its first value
            config = space.config({**filler, **base, name: value}, drop_inactive=True)
            assert name in config and config[name] == value, (name, value)
            found.append((f"{name}={value}", config))
    return found


def server_flags(space: SearchSpace, config: Config) -> list[str]:
    """The rendered command line without the server command (what launch_server parses)."""
    argv = space.render(config, resolve=False).argv
    command = shlex.split(space.command)
    assert argv[:len(command)] == command
    return argv[len(command):]
