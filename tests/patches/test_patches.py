"""Source patches on a real file of an installed (stand-in) package, locally and over SSH."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from tests.support.host import PYTHON, host_fields, run_killed_tuner
from tests.support.patches import GATE, GATE_0_5_9, GATE_0_5_13
from tuner.errors import ConfigError, TunerError
from tuner.host import Host
from tuner.patches import JOURNAL_NAME, PatchManager, PatchSpec

LOGGING = PatchSpec(
    name="log_gate",
    package="sglang",
    file="srt/model_executor/model_runner.py",
    find='        """Check if flashinfer autotune should be run."""\n',
    replace='        """Check if flashinfer autotune should be run."""\n        print("gate")\n',
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder on PYTHONPATH holding a stand-in ``sglang`` package with the 0.5.9 gate."""
    folder = tmp_path / "site"
    source = folder / "sglang" / "srt" / "model_executor" / "model_runner.py"
    source.parent.mkdir(parents=True)
    (folder / "sglang" / "__init__.py").write_text('__version__ = "0.5.9"\n')
    source.write_bytes(GATE_0_5_9.encode())
    return folder


@pytest.fixture
def target(site: Path) -> Path:
    return site / "sglang" / "srt" / "model_executor" / "model_runner.py"


def _manager(host: Host, site: Path, tmp_path: Path) -> PatchManager:
    return PatchManager(
        host,
        python=PYTHON,
        env={"PYTHONPATH": str(site)},
        journal_dir=str(tmp_path / "journal"),
        patches=[GATE, LOGGING],
    )


def test_apply_then_revert_restores_the_file_byte_for_byte(
    host: Host, site: Path, target: Path, tmp_path: Path
) -> None:
    manager = _manager(host, site, tmp_path)
    original = target.read_bytes()
    cache = target.parent / "__pycache__"
    cache.mkdir()
    (cache / "model_runner.cpython-311.pyc").write_bytes(b"stale")
    assert manager.locate(GATE) == str(target)
    assert manager.status(GATE) == "clean"

    manager.apply(GATE)
    manager.apply(GATE)  # idempotent

    patched = target.read_bytes()
    assert patched == original.replace(b'# "flashinfer_cutlass"', b'"flashinfer_cutlass"')
    assert manager.status(GATE) == "applied"
    assert not (cache / "model_runner.cpython-311.pyc").exists()  # no stale bytecode
    assert manager.checksums() == {
        "autotune_gate": {
            "file": str(target),
            "sha256_before": _sha(original),
            "sha256_after": _sha(patched),
        }
    }
    journal = json.loads((tmp_path / "journal" / JOURNAL_NAME).read_text())
    backup = Path(journal["files"][str(target)]["backup"])
    assert backup.read_bytes() == original

    manager.revert(GATE)
    manager.revert(GATE)  # idempotent

    assert target.read_bytes() == original
    assert manager.status(GATE) == "clean"
    assert manager.checksums() == {}
    assert not backup.exists()


def test_a_file_without_the_expected_text_is_never_written(
    host: Host, site: Path, target: Path, tmp_path: Path
) -> None:
    target.write_bytes(GATE_0_5_13.encode())
    before = target.stat().st_mtime_ns
    manager = _manager(host, site, tmp_path)
    assert manager.status(GATE) == "mismatch"
    with pytest.raises(ConfigError) as refused:
        manager.apply(GATE)
    message = str(refused.value)
    assert str(target) in message and "autotune_gate" in message
    assert "0.5.13" in message and "drop or pin the dimension" in message and "\n" not in message
    assert target.read_bytes() == GATE_0_5_13.encode()
    assert target.stat().st_mtime_ns == before
    assert not (tmp_path / "journal" / JOURNAL_NAME).exists()


def test_text_present_twice_is_a_mismatch(
    host: Host, site: Path, target: Path, tmp_path: Path
) -> None:
    target.write_bytes((GATE_0_5_9 + GATE_0_5_9).encode())
    manager = _manager(host, site, tmp_path)
    assert manager.status(GATE) == "mismatch"
    with pytest.raises(ConfigError):
        manager.apply(GATE)


def test_a_file_changed_by_someone_else_is_not_overwritten(
    host: Host, site: Path, target: Path, tmp_path: Path
) -> None:
    manager = _manager(host, site, tmp_path)
    manager.apply(GATE)
    edited = target.read_bytes() + b"# someone's edit\n"
    target.write_bytes(edited)
    with pytest.raises(TunerError, match="changed by someone else"):
        manager.revert_all()
    assert target.read_bytes() == edited


def test_two_patches_of_one_file_revert_in_any_order(
    host: Host, site: Path, target: Path, tmp_path: Path
) -> None:
    manager = _manager(host, site, tmp_path)
    original = target.read_bytes()
    manager.set_active({"autotune_gate", "log_gate"})
    both = target.read_bytes()
    assert b'print("gate")' in both and b'            "flashinfer_cutlass",' in both
    manager.set_active({"log_gate"})
    only_log = original.replace(LOGGING.find.encode(), LOGGING.replace.encode())
    assert target.read_bytes() == only_log
    assert manager.status(GATE) == "clean" and manager.status(LOGGING) == "applied"
    manager.set_active({"autotune_gate"})
    assert target.read_bytes() == original.replace(GATE.find.encode(), GATE.replace.encode())
    manager.set_active(set())
    assert target.read_bytes() == original
    with pytest.raises(ConfigError, match="unknown"):
        manager.set_active({"no_such_patch"})


def test_a_package_that_is_not_installed_or_a_path_outside_it_is_a_config_error(
    host: Host, site: Path, tmp_path: Path
) -> None:
    manager = _manager(host, site, tmp_path)
    with pytest.raises(ConfigError, match="package 'not_installed_pkg' not found"):
        manager.locate(dataclasses.replace(GATE, name="p1", package="not_installed_pkg"))
    with pytest.raises(ConfigError, match="inside package"):
        manager.locate(dataclasses.replace(GATE, name="p2", file="../../etc/passwd"))


@pytest.mark.parametrize("moment", ["before-write", "after-write", "applied"])
def test_a_tuner_killed_while_patching_is_undone_by_the_next_run(
    host: Host,
    site: Path,
    target: Path,
    tmp_path: Path,
    moment: str,
    request: pytest.FixtureRequest,
) -> None:
    original = target.read_bytes()
    spec = {
        "host": host_fields(host, request),
        "patch": dataclasses.asdict(GATE),
        "python": PYTHON,
        "env": {"PYTHONPATH": str(site)},
        "journal_dir": str(tmp_path / "journal"),
    }
    killed = run_killed_tuner(spec, f"patch:{moment}")
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    if moment != "before-write":
        assert target.read_bytes() != original  # the kill left the file patched

    restored = _manager(host, site, tmp_path).revert_all()

    assert restored == [str(target)]
    assert target.read_bytes() == original
    assert _manager(host, site, tmp_path).revert_all() == []
    assert list((tmp_path / "journal").glob("*.orig")) == []


@pytest.mark.parametrize("where", ["file", "backup"])
def test_a_journal_naming_a_file_outside_the_package_is_refused_not_reverted(
    host: Host, site: Path, target: Path, tmp_path: Path, where: str
) -> None:
    manager = _manager(host, site, tmp_path)
    manager.apply(GATE)
    journal_path = tmp_path / "journal" / JOURNAL_NAME
    document = json.loads(journal_path.read_text())
    entry = document["files"][str(target)]
    victim = tmp_path / "victim.txt"  # what someone who can write the journal wants overwritten
    victim.write_bytes(b"precious")
    planted = tmp_path / "planted.orig"
    planted.write_bytes(b"overwritten")
    if where == "file":
        document["files"] = {str(victim): {**entry, "original": _sha(b"overwritten")}}
    else:
        document["files"][str(target)] = {**entry, "backup": str(planted)}
    journal_path.write_text(json.dumps(document))

    fresh = _manager(host, site, tmp_path)  # the next run reads the journal back
    with pytest.raises(TunerError) as error:
        fresh.revert_all()
    message = str(error.value)
    assert "\n" not in message and "refused" in message and "nothing was reverted" in message
    assert victim.read_bytes() == b"precious"
    assert planted.exists()
    if where == "backup":
        assert target.read_bytes() != b"overwritten"
