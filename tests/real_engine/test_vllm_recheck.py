"""`tuner recheck`'s version check on a real engine: vLLM's ``--help`` on this machine's CPU
install, read for a stored launch this vLLM cannot take (a flag it lacks, and a value outside a
flag's choices). A whole recheck of a study's winner on vLLM runs in
``tests/real_engine/test_init_vllm.py`` (one study for init, optimize and recheck)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real_engine.conftest import space_on
from tests.support.sshd import free_port
from tuner.recheck import BreakKind, StoredLaunch, installed_interface, version_breaks
from tuner.space import load_space
from tuner.study.trial import build_target

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]


def test_the_version_check_reads_the_real_help(tiny_model: Path, tmp_path: Path) -> None:
    space = load_space(space_on(tmp_path, "vllm-cpu-tiny.yaml", tiny_model, free_port()))
    target = build_target(space, emulate=False)
    try:
        engine = installed_interface(space, target)
    finally:
        target.close()
    assert "--max-num-seqs" in engine.flags and "balanced" in engine.choices["--performance-mode"]
    launch = StoredLaunch(4, (("--max-num-seqs", "8"), ("--max-num-seq-groups", "8"),
                              ("--performance-mode", "fastest")))
    found = {b.kind: b for b in version_breaks([launch], engine, {}, {})}
    assert set(found) == {BreakKind.UNKNOWN_FLAG, BreakKind.NOT_A_CHOICE}
    assert found[BreakKind.UNKNOWN_FLAG].what == "--max-num-seq-groups"
    assert found[BreakKind.NOT_A_CHOICE].what == "--performance-mode fastest"
