"""Read the two SGLang source files the tuner's patches edit, as the emulated server starts.

The ``sglang`` package is found on the server's own ``PYTHONPATH`` with
``importlib.util.find_spec`` (without importing it); without one, the pristine stand-in shipped
in ``tuner/emulator/standin`` is read. Both files are parsed, not imported:

- ``srt/model_executor/model_runner.py``: the gate is *patched* when the string
  ``"flashinfer_cutlass"`` is an element of the list in ``_should_run_flashinfer_autotune``
  (a commented line is not);
- ``srt/layers/communicator.py``: the allreduce fusion is *forced* when
  ``apply_flashinfer_allreduce_fusion``, evaluated alone as on an SM120 host with CUDA and
  FlashInfer (``_is_sm90_supported`` and ``_is_sm100_supported`` false, capability 12.0, the
  flag given), returns true. A gate that names something the real module does not define
  (``_is_sm120_supported`` in 0.5.9) is not forced.

A file that no longer parses makes the server fail at start with Python's own SyntaxError, as
SGLang would on import.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

__all__ = ["STANDIN_PACKAGE", "SourceState", "find_sglang_package", "read_source_state"]

STANDIN_PACKAGE = Path(__file__).parent / "standin" / "sglang"
GATE_FILE = Path("srt/model_executor/model_runner.py")
ALLREDUCE_FILE = Path("srt/layers/communicator.py")


@dataclass(frozen=True)
class SourceState:
    """What the source files say.

    Attributes:
        package_dir: the ``sglang`` package that was read.
        shipped: True when no ``sglang`` was on the path and the shipped stand-in was read.
        patched_gate: FlashInfer autotune is allowed for flashinfer_cutlass.
        forced_allreduce: the allreduce-fusion gate accepts SM120.
        syntax_error: ``(file, line, message, text)`` of a file that does not parse.
    """

    package_dir: Path
    shipped: bool
    patched_gate: bool
    forced_allreduce: bool
    syntax_error: tuple[str, int, str, str] | None = None


def find_sglang_package() -> tuple[Path, bool]:
    """The ``sglang`` package directory on this Python's path, and whether it is the shipped one."""
    spec = importlib.util.find_spec("sglang")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))), False
    return STANDIN_PACKAGE, True


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def gate_is_patched(tree: ast.Module) -> bool:
    """``"flashinfer_cutlass"`` is listed in ``_should_run_flashinfer_autotune``."""
    function = _function(tree, "_should_run_flashinfer_autotune")
    if function is None:
        return False
    for node in ast.walk(function):
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.NotIn | ast.In):
            for candidate in node.comparators:
                if isinstance(candidate, ast.List | ast.Tuple | ast.Set):
                    values = [e.value for e in candidate.elts if isinstance(e, ast.Constant)]
                    if "flashinfer_cutlass" in values:
                        return True
    return False


def _sm120_host() -> dict[str, Any]:
    """The names ``apply_flashinfer_allreduce_fusion`` reads in SGLang 0.5.9's module, as they
    are on the emulated host (SM120, CUDA, FlashInfer, one node, the flag given)."""
    server_args = SimpleNamespace(enable_flashinfer_allreduce_fusion=True)
    return {
        "__builtins__": {},
        "_is_cuda": True,
        "_is_flashinfer_available": True,
        "_is_sm90_supported": False,
        "_is_sm100_supported": False,
        "FUSE_ALLREDUCE_MAX_BATCH_SIZE": 2048,
        "torch": SimpleNamespace(cuda=SimpleNamespace(get_device_capability=lambda *_: (12, 0))),
        "is_dp_attention_enabled": lambda: False,
        "get_global_server_args": lambda: server_args,
    }


def allreduce_is_forced(tree: ast.Module) -> bool:
    """``apply_flashinfer_allreduce_fusion`` accepts SM120 (evaluated as on the emulated host)."""
    function = _function(tree, "apply_flashinfer_allreduce_fusion")
    if function is None:
        return False
    namespace = _sm120_host()
    try:
        exec(compile(ast.Module(body=[function], type_ignores=[]), "<gate>", "exec"), namespace)
        return bool(namespace["apply_flashinfer_allreduce_fusion"](1))
    except Exception:  # a name the module lacks: SGLang would fail there, never fuse
        return False


def _parse(path: Path) -> ast.Module | tuple[str, int, str, str] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as error:
        return str(path), error.lineno or 0, error.msg, (error.text or "").rstrip()


def read_source_state() -> SourceState:
    """Find the ``sglang`` package and read both gates from it."""
    package, shipped = find_sglang_package()
    gate = _parse(package / GATE_FILE)
    allreduce = _parse(package / ALLREDUCE_FILE)
    for parsed in (gate, allreduce):
        if isinstance(parsed, tuple):
            return SourceState(package, shipped, False, False, syntax_error=parsed)
    return SourceState(
        package_dir=package,
        shipped=shipped,
        patched_gate=isinstance(gate, ast.Module) and gate_is_patched(gate),
        forced_allreduce=isinstance(allreduce, ast.Module) and allreduce_is_forced(allreduce),
    )
