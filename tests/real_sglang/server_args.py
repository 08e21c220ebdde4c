"""SGLang's own command-line parser, built from the real ``srt/server_args.py`` of the wheel.

``server_args.py`` imports nine SGLang modules at its top (connector, environ, the tool-call
and reasoning parsers, LoRA registry, FLA kernels, ``utils.common``, the HF utilities,
``sglang.utils``), and through ``sglang/__init__.py`` torch, transformers and the GPU stack. Those nine are replaced,
only while the file is loaded, by stub modules whose every attribute is a :class:`_Stub`: a value
that is false, iterates empty, adds as the other operand and, called with one argument, returns it
(``type=nullable_str``). Everything ``ServerArgs.add_cli_args`` declares itself (the flags, their
kinds, their ``choices`` lists) is SGLang's own. The choices of the few flags whose list comes
from a stubbed module (tool-call and reasoning parsers, LoRA target modules) come out empty, so
those flags refuse every value: no shipped space uses them.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

__all__ = ["STUBBED_MODULES", "StrictParser", "server_args_parser"]

STUBBED_MODULES = (
    "sglang.srt.connector",
    "sglang.srt.environ",
    "sglang.srt.function_call.function_call_parser",
    "sglang.srt.layers.attention.fla.chunk_delta_h",
    "sglang.srt.lora.lora_registry",
    "sglang.srt.parser.reasoning_parser",
    "sglang.srt.utils.common",
    "sglang.srt.utils.hf_transformers_utils",
    "sglang.utils",
)
_PACKAGES = ("sglang", "sglang.srt")


class _Stub:
    """An attribute of a stubbed module (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> _Stub:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return args[0] if len(args) == 1 and not kwargs else _Stub(f"{self._name}()")

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __add__(self, other: Any) -> Any:
        return other

    __radd__ = __add__

    def __repr__(self) -> str:
        return f"<stub {self._name}>"


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> _Stub:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self.__name__}.{name}")


class StrictParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises ``ValueError(message)`` instead of exiting."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise ValueError(message)


def server_args_parser(package: Path) -> StrictParser:
    """SGLang's launch_server parser from ``package/srt/server_args.py`` (``package``: the
    unpacked wheel's ``sglang`` folder). ``sys.modules`` is as before when this returns."""
    names = (*_PACKAGES, *STUBBED_MODULES, "sglang.srt.server_args")
    saved = {name: sys.modules[name] for name in names if name in sys.modules}
    try:
        for name in _PACKAGES:
            module = types.ModuleType(name)
            module.__path__ = []
            sys.modules[name] = module
        for name in STUBBED_MODULES:
            sys.modules[name] = _StubModule(name)
        spec = importlib.util.spec_from_file_location(
            "sglang.srt.server_args", package / "srt" / "server_args.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        parser = StrictParser(prog="sglang.launch_server")
        module.ServerArgs.add_cli_args(parser)
        return parser
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
