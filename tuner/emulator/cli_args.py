"""The emulator's command line: SGLang 0.5.9's ``launch_server`` flags plus two of its own.

The parser is built from :mod:`tuner.emulator.sglang_flags`, so ``--help`` prints every flag as
SGLang prints it, unique prefixes work (``allow_abbrev=True``, as in SGLang: ``--tp`` is
``--tp-size``) and an unknown flag ends the process with argparse's exit code 2. The emulator's
own flags are ``--time-scale K`` and ``--emulator-seed N``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from tuner.emulator.sglang_flags import DEPRECATED_SWITCHES, OPTIONS, SWITCHES
from tuner.emulator.versions import installed

__all__ = ["build_parser", "parse_server_args", "server_args_from_flags"]

_TYPES = {"str": str, "int": int, "float": float, "json": json.loads}

# argparse dests that SGLang renames in ServerArgs.from_cli_args.
_RENAMED_DESTS = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "attention_context_parallel_size": "attn_cp_size",
    "moe_data_parallel_size": "moe_dp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
}


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def build_parser(prog: str = "python -m sglang.launch_server") -> argparse.ArgumentParser:
    """An argparse parser that accepts exactly SGLang 0.5.9's flags plus the emulator's (as the
    emulated version renames them: :mod:`tuner.emulator.versions`)."""
    version = installed()
    parser = argparse.ArgumentParser(
        prog=prog,
        description=f"EMULATED GLM-5 host (tuner.emulator): SGLang {version.version} launch_server flags.",
    )
    for names in SWITCHES:
        parser.add_argument(*names.split(), action="store_true")
    for name in DEPRECATED_SWITCHES:
        parser.add_argument(name, action="store_const", const=None, help="deprecated")
    for entry in OPTIONS:
        names, type_name, default, choices, nargs = entry[:5]
        kwargs: dict[str, Any] = {"type": _TYPES[type_name], "default": default}
        if len(entry) > 5:
            kwargs["dest"] = entry[5]
        if choices is not None:
            kwargs["choices"] = choices
        if nargs is not None:
            kwargs["nargs"] = nargs
            if nargs == "?":
                kwargs["const"] = ""
        if names.split()[0] == "--model-path":
            kwargs["required"] = True
        renamed = [version.renamed.get(name, name) for name in names.split()]
        if renamed != names.split() and "dest" not in kwargs:  # the engine reads the old name
            kwargs["dest"] = names.split()[0].lstrip("-").replace("-", "_")
        parser.add_argument(*renamed, **kwargs)
    emulator = parser.add_argument_group("emulator (not SGLang)")
    emulator.add_argument(
        "--time-scale",
        type=_positive_float,
        default=1.0,
        help="divide every duration by K (start-up, prefill, token steps); published in "
        "/server_info as emulator.time_scale",
    )
    emulator.add_argument(
        "--emulator-seed",
        type=int,
        default=None,
        help="seed of the performance noise (default: random)",
    )
    return parser


def _parser() -> argparse.ArgumentParser:
    return _parser_of(installed().version)


@cache
def _parser_of(version: str) -> argparse.ArgumentParser:
    return build_parser()


def _names() -> dict[str, str]:
    return _names_of(installed().version)


@cache
def _names_of(version: str) -> dict[str, str]:
    """Every way to name a flag (``--tp-size``, ``tp_size``, ``--model``) -> its server-args name."""
    names: dict[str, str] = {}
    for action in _parser()._actions:
        dest = _RENAMED_DESTS.get(action.dest, action.dest)
        for option in action.option_strings:
            names[option] = dest
            names[option.lstrip("-").replace("-", "_")] = dest
        names[action.dest] = dest
        names[dest] = dest
    return names


def _rename(values: Mapping[str, Any]) -> dict[str, Any]:
    return {_RENAMED_DESTS.get(key, key): value for key, value in values.items()}


def parse_server_args(argv: Sequence[str]) -> dict[str, Any]:
    """Parse a launch command line into SGLang's server-args names (``tp_size``, ...).

    ``--config FILE.yaml`` is read as SGLang 0.5.9's ``prepare_server_args`` reads it: its keys
    become flags placed before the command line's (which win). Exits with code 2 on an unknown
    or malformed flag, as argparse (and SGLang) does.
    """
    return _rename(vars(build_parser().parse_args(_merge_config(list(argv)))))


def _merge_config(argv: list[str]) -> list[str]:
    """SGLang's ``ConfigArgumentMerger.merge_config_with_args`` for store/store_true flags."""
    if "--config" not in argv:
        return argv
    import yaml

    index = argv.index("--config")
    if argv.count("--config") > 1 or index == len(argv) - 1:
        raise SystemExit("ValueError: give one config file after --config")
    with open(argv[index + 1]) as stream:
        config = yaml.safe_load(stream) or {}
    switches = {a.dest for a in _parser()._actions if isinstance(a, argparse._StoreTrueAction)}
    merged: list[str] = []
    for key, value in config.items():
        if isinstance(value, bool):
            if key.replace("-", "_") in switches:
                merged += [f"--{key}"] if value else []
            else:
                merged += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            merged += [f"--{key}", *(str(item) for item in value)] if value else []
        else:
            merged += [f"--{key}", str(value)]
    return merged + argv[:index] + argv[index + 2 :]


def server_args_from_flags(flags: Mapping[str, object]) -> dict[str, Any]:
    """Complete server args from a partial mapping of flags to values.

    Keys may be written as flags (``--moe-runner-backend``) or as names (``moe_runner_backend``;
    ``tp_size`` and ``tensor_parallel_size`` both work). Missing flags take SGLang's defaults;
    a switch is on when its value is truthy.

    Raises:
        KeyError: a key that is no SGLang 0.5.9 flag.
    """
    args = _rename(vars(_parser().parse_args(["--model-path", "/models/GLM-5-NVFP4"])))
    names = _names()
    for key, value in flags.items():
        name = names.get(key) or names.get(key.replace("-", "_"))
        if name is None or name == "help":
            raise KeyError(f"{key!r} is not an SGLang 0.5.9 launch_server flag")
        args[name] = value
    return args
