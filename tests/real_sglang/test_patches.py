"""Every shipped patch against the published SGLang 0.5.9 source, through the tuner's own patch
code (``tuner/patches.py`` on a local copy of the unpacked wheel), and the emulator's stand-in
files against the same text."""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.real_sglang.conftest import REPO
from tuner.emulator import source_files
from tuner.engines import load_profile
from tuner.host import LocalHost
from tuner.patches import PatchManager, PatchSpec
from tuner.space import load_space

SPACES = sorted((REPO / "search_spaces").glob("*.yaml"))
STANDIN = REPO / "tuner/emulator/standin/sglang"


def sglang_patches() -> list[tuple[str, PatchSpec]]:
    """(space file, patch) for every patch on the sglang package in a shipped search space."""
    found = []
    for path in SPACES:
        for patch in load_space(path).patches.values():
            if patch.package == "sglang":
                found.append((path.name, patch))
    return found


PATCHES = sglang_patches()


def test_the_shipped_spaces_have_sglang_patches_to_check() -> None:
    names = {patch.name for _, patch in PATCHES}
    assert {"autotune_gate", "force_allreduce_fusion"} <= names
    assert load_profile("sglang").package == "sglang"


@pytest.mark.parametrize(("space", "patch"), PATCHES, ids=[f"{s}:{p.name}" for s, p in PATCHES])
def test_a_patch_applies_once_compiles_and_reverts(real_sglang: Path, tmp_path: Path,
                                                   space: str, patch: PatchSpec) -> None:
    site = tmp_path / "site"
    shutil.copytree(real_sglang, site / "sglang")
    target = site / "sglang" / patch.file
    original = target.read_bytes()
    manager = PatchManager(LocalHost(), python=sys.executable, env={"PYTHONPATH": str(site)},
                           journal_dir=str(tmp_path / "journal"), patches=[patch])
    assert manager.locate(patch) == str(target)
    assert manager.status(patch) == "clean", PatchManager.mismatch_message(patch, str(target))
    manager.apply(patch)
    patched = target.read_text()
    assert patched.count(patch.replace) == 1 and patch.find not in patched
    assert manager.status(patch) == "applied"
    compile(patched, str(target), "exec")  # the patched file is still Python
    manager.revert_all()
    assert target.read_bytes() == original


def gate(source: str, **host: object) -> bool:
    """``apply_flashinfer_allreduce_fusion(1)`` of ``source``, run alone with the names of its
    module set as on a host (``host`` overrides; the flag given, one node, FlashInfer there)."""
    tree = ast.parse(source)
    function = next(node for node in tree.body if isinstance(node, ast.FunctionDef)
                    and node.name == "apply_flashinfer_allreduce_fusion")
    namespace: dict[str, object] = {
        "_is_cuda": True, "_is_flashinfer_available": True, "FUSE_ALLREDUCE_MAX_BATCH_SIZE": 2048,
        "is_dp_attention_enabled": lambda: False,
        "get_global_server_args": lambda: SimpleNamespace(enable_flashinfer_allreduce_fusion=True),
        **host,
    }
    exec(compile(ast.Module(body=[function], type_ignores=[]), "<gate>", "exec"), namespace)
    return bool(namespace["apply_flashinfer_allreduce_fusion"](1))


def host_of(major: int) -> dict[str, object]:
    """The module-level names of communicator.py on a GPU of compute capability ``major``.x."""
    return {"_is_sm90_supported": major == 9, "_is_sm100_supported": major == 10,
            "torch": SimpleNamespace(cuda=SimpleNamespace(get_device_capability=lambda *_:
                                                          (major, 0)))}


def test_forced_allreduce_fusion_enables_the_real_gate_on_sm120_only(real_sglang: Path) -> None:
    patch = load_space(REPO / "search_spaces/glm5.yaml").patches["force_allreduce_fusion"]
    real = (real_sglang / patch.file).read_text()
    patched = real.replace(patch.find, patch.replace, 1)
    assert not gate(real, **host_of(12))  # 0.5.9 as shipped: no fusion on SM120
    assert gate(patched, **host_of(12))  # the patch turns it on there
    assert gate(patched, **host_of(9)) and gate(patched, **host_of(10))  # unchanged
    assert not gate(patched, **host_of(8))
    # The flag is the only other switch on that path: server_args.py never turns it off on
    # SM120 (only turns it on by itself for SM90/SM100).
    server_args = (real_sglang / "srt/server_args.py").read_text()
    assert "self.enable_flashinfer_allreduce_fusion = False" not in server_args
    # The emulator reads the real file the same way.
    assert not source_files.allreduce_is_forced(ast.parse(real))
    assert source_files.allreduce_is_forced(ast.parse(patched))


def test_the_autotune_gate_patch_is_what_the_emulator_reads(real_sglang: Path) -> None:
    patch = load_space(REPO / "search_spaces/glm5.yaml").patches["autotune_gate"]
    real = (real_sglang / patch.file).read_text()
    assert not source_files.gate_is_patched(ast.parse(real))
    assert source_files.gate_is_patched(ast.parse(real.replace(patch.find, patch.replace, 1)))


def enclosing_function(source: str, offset: int) -> tuple[str, str]:
    """Name and exact text of the innermost function whose lines hold character ``offset``."""
    line = source.count("\n", 0, offset) + 1
    best: ast.FunctionDef | None = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.lineno <= line <= (node.end_lineno or 0):
            if best is None or node.lineno >= best.lineno:
                best = node
    assert best is not None, f"line {line} is in no function"
    return best.name, ast.get_source_segment(source, best) or ""


@pytest.mark.parametrize(("space", "patch"), PATCHES, ids=[f"{s}:{p.name}" for s, p in PATCHES])
def test_the_emulators_standin_holds_the_real_text_of_each_patched_region(
        real_sglang: Path, space: str, patch: PatchSpec) -> None:
    real = (real_sglang / patch.file).read_text()
    standin = (STANDIN / patch.file).read_text()
    assert standin.count(patch.find) == 1, f"{STANDIN / patch.file}: the find text, once"
    name, real_function = enclosing_function(real, real.index(patch.find))
    standin_name, standin_function = enclosing_function(standin, standin.index(patch.find))
    assert standin_name == name
    assert standin_function == real_function
