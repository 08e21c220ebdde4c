"""Source patches as search dimensions: apply with a backup and checksums, revert byte for byte.

A :class:`PatchSpec` names a file of an installed package (found by asking the host's Python
where the package lives), the exact text to find and its replacement. :class:`PatchManager` keeps
a journal on the host (``<journal_dir>/patch-journal.json``) and a backup of each file's original
bytes, written *before* the file is changed, so that a tuner killed at any moment is undone by
:meth:`PatchManager.revert_all` at the start of the next run. A file whose content is neither what
a patch expects nor what the tuner itself wrote is never written. A journal read back must name
only files inside the package its patches belong to, and backups inside the journal's folder:
one naming anything else (another user's doing, or a damaged file) is refused, never reverted.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from tuner.errors import ConfigError, HostError, TunerError

if TYPE_CHECKING:  # the search space imports PatchSpec: loading a YAML must not load SSH
    from tuner.host import Host

__all__ = ["JOURNAL_NAME", "PatchManager", "PatchSpec", "PatchStatus"]

JOURNAL_NAME = "patch-journal.json"
PatchStatus = Literal["clean", "applied", "mismatch"]

_LOCATE = (
    "import importlib.util, os, sys\n"
    "spec = importlib.util.find_spec(sys.argv[1])\n"
    "if spec is None: sys.exit(3)\n"
    "locations = list(spec.submodule_search_locations or [])\n"
    "print(locations[0] if locations else os.path.dirname(spec.origin))\n"
)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class PatchSpec:
    """One source patch.

    Attributes:
        name: the patch's name (the search dimension's value refers to it).
        package: the installed package the file belongs to (``sglang``).
        file: the file's path inside the package (``srt/model_executor/model_runner.py``).
        find: the exact text to replace; it must occur exactly once.
        replace: the text put in its place.
        description: what the patch does, for reports.
    """

    name: str
    package: str
    file: str
    find: str
    replace: str
    description: str = ""


class PatchManager:
    """Applies and reverts patches on one host, journaled so a killed run can be undone.

    Args:
        host: the host the package is installed on.
        python: the host's Python that imports the package.
        env: environment for that Python (e.g. the emulated host's PYTHONPATH).
        journal_dir: folder on the host for the journal and the backups; keep it stable across
            runs (and out of the run folders that are cleaned up).
        patches: the patches :meth:`set_active` may name.
    """

    def __init__(
        self,
        host: Host,
        *,
        python: str,
        env: dict[str, str],
        journal_dir: str,
        patches: Iterable[PatchSpec] = (),
    ) -> None:
        self.host = host
        self.python = python
        self.env = dict(env)
        self.journal_dir = journal_dir.rstrip("/") or "/"
        self.journal_path = f"{self.journal_dir}/{JOURNAL_NAME}"
        self._known: dict[str, PatchSpec] = {p.name: p for p in patches}
        self._paths: dict[str, str] = {}
        self._package_dirs: dict[str, str] = {}
        self._vetted: set[tuple[str, str]] = set()

    # -- where and what -------------------------------------------------------------------------

    def locate(self, patch: PatchSpec) -> str:
        """The absolute path of the patch's file on the host (asks the host's Python).

        Raises:
            ConfigError: the file path leaves the package, or the package is not installed.
        """
        if patch.name in self._paths:
            return self._paths[patch.name]
        relative = PurePosixPath(patch.file)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts:
            raise ConfigError(
                f"patch {patch.name}: file {patch.file!r} must be a path inside package "
                f"{patch.package!r} (relative, without ..)"
            )
        path = str(PurePosixPath(self._package_dir(patch.package, patch.name)) / relative)
        self._paths[patch.name] = path
        return path

    def _package_dir(self, package: str, patch_name: str) -> str:
        """Where ``package`` is installed on the host (asks the host's Python once).

        Raises:
            ConfigError: the package is not installed.
        """
        if package in self._package_dirs:
            return self._package_dirs[package]
        command = f"{shlex.quote(self.python)} -c {shlex.quote(_LOCATE)} {shlex.quote(package)}"
        result = self.host.run(command, env=self.env, timeout=120.0)
        if not result.ok or not result.stdout.strip():
            raise ConfigError(
                f"patch {patch_name}: package {package!r} not found by {self.python} on "
                f"{self.host.name} ({result.summary()}): install it or fix the patch's package"
            )
        self._package_dirs[package] = result.stdout.strip().splitlines()[-1]
        return self._package_dirs[package]

    def status(self, patch: PatchSpec) -> PatchStatus:
        """``clean`` (find text present exactly once), ``applied`` (the tuner's journal says so
        and the file is what it wrote, or the replacement is there and the find text is not), or
        ``mismatch`` (neither: the tuner will not write this file)."""
        path = self.locate(patch)
        return _status(patch, self._read(path, patch), self._load().get(path))

    def left_by_earlier_run(self, patch: PatchSpec) -> bool:
        """Whether the journal lists the patch's file: a tuner was stopped before restoring it,
        and :meth:`revert_all` (run first by ``tuner optimize``) will put the original back."""
        return self.locate(patch) in self._load()

    def original_status(self, patch: PatchSpec) -> PatchStatus:
        """:meth:`status` of the file as :meth:`revert_all` will leave it: its journaled
        original when a run left it patched, else the file itself."""
        path = self.locate(patch)
        entry = self._load().get(path)
        if entry is None:
            return self.status(patch)
        return _status(patch, self.host.read_file(entry["backup"]), None)

    def checksums(self) -> dict[str, dict[str, str]]:
        """For each applied patch: its file and the file's sha256 before and after patching."""
        return {
            name: {
                "file": path,
                "sha256_before": entry["original"],
                "sha256_after": entry["current"],
            }
            for path, entry in self._load().items()
            for name in entry["applied"]
        }

    # -- apply and revert -----------------------------------------------------------------------

    def apply(self, patch: PatchSpec) -> None:
        """Apply ``patch``: back the original up, write, verify, journal checksums. Idempotent.

        Raises:
            ConfigError: the file does not hold the text to find exactly once (mismatch).
            TunerError: the file changed under the tuner, or a write did not verify.
        """
        self._known.setdefault(patch.name, patch)
        path = self.locate(patch)
        journal = self._load()
        entry = journal.get(path)
        content = self._read(path, patch)
        digest = _sha256(content)
        if entry:
            self._check_ours(path, entry, digest)
            if patch.name in entry["applied"]:
                return
        state = _status(patch, content, entry)
        if state == "applied":
            return  # already in place upstream or by hand: nothing to write, nothing to undo
        if state == "mismatch":
            raise ConfigError(self.mismatch_message(patch, path))
        text = content.decode("utf-8", errors="surrogateescape")
        new = text.replace(patch.find, patch.replace, 1).encode("utf-8", errors="surrogateescape")
        if entry is None:
            entry = self._backup(path, content, patch.package)
        entry["applied"].append(patch.name)
        entry["steps"][patch.name] = {"find": patch.find, "replace": patch.replace}
        entry["expected"].append(_sha256(new))
        journal[path] = entry
        self._save(journal)  # write-ahead: a kill from here on is undone from the backup
        self._write_verified(path, new)
        entry["current"] = _sha256(new)
        self._save(journal)

    def revert(self, patch: PatchSpec) -> None:
        """Undo ``patch`` (the file's other applied patches stay). Idempotent."""
        path = self.locate(patch)
        journal = self._load()
        entry = journal.get(path)
        if not entry or patch.name not in entry["applied"]:
            return
        remaining = [name for name in entry["applied"] if name != patch.name]
        if not remaining:
            self._restore(path, entry, journal)
            return
        content = self.host.read_file(path)
        self._check_ours(path, entry, _sha256(content))
        text = self.host.read_file(entry["backup"]).decode("utf-8", errors="surrogateescape")
        for name in remaining:
            step = entry["steps"][name]
            text = text.replace(step["find"], step["replace"], 1)
        new = text.encode("utf-8", errors="surrogateescape")
        entry["expected"].append(_sha256(new))
        entry["applied"] = remaining
        self._save(journal)
        self._write_verified(path, new)
        entry["current"] = _sha256(new)
        self._save(journal)

    def revert_all(self) -> list[str]:
        """Restore every file the journal lists to its original bytes (after a killed run too).

        Returns:
            The files restored.
        """
        journal = self._load()
        restored = []
        for path in list(journal):
            self._restore(path, journal[path], journal)
            restored.append(path)
        return restored

    def set_active(self, names: set[str]) -> None:
        """Make exactly the patches ``names`` applied: revert the others, apply these.

        Raises:
            ConfigError: a name that no known patch has.
        """
        unknown = sorted(set(names) - set(self._known))
        if unknown:
            raise ConfigError(
                f"patch(es) {', '.join(unknown)} unknown: define them under patches: "
                f"(known: {', '.join(sorted(self._known)) or 'none'})"
            )
        applied = {name for entry in self._load().values() for name in entry["applied"]}
        for name in sorted(applied - set(names)):
            if name in self._known:
                self.revert(self._known[name])
        if applied - set(names) - set(self._known):  # journaled by an earlier run, spec unknown
            self.revert_all()
        for name in sorted(names):
            self.apply(self._known[name])

    @staticmethod
    def mismatch_message(patch: PatchSpec, path: str) -> str:
        """The one-line error for a file that does not hold the patch's text."""
        return (
            f"{path}: patch {patch.name}: text to find not present exactly once (already patched "
            f"upstream, e.g. SGLang >= 0.5.13, or the file moved); drop or pin the dimension"
        )

    # -- journal and files ----------------------------------------------------------------------

    def _read(self, path: str, patch: PatchSpec) -> bytes:
        try:
            return self.host.read_file(path)
        except HostError as error:
            raise ConfigError(
                f"{path}: patch {patch.name}: the file cannot be read ({error}): the package "
                f"layout differs from the patch's; drop or pin the dimension"
            ) from None

    def _load(self) -> dict[str, Any]:
        if not self.host.exists(self.journal_path):
            return {}
        try:
            files = dict(json.loads(self.host.read_file(self.journal_path))["files"])
            for path, entry in files.items():
                self._vet(path, entry)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise TunerError(
                f"{self.journal_path}: the patch journal is unreadable ({error}); restore the "
                f"files from the .orig backups beside it, then delete it"
            ) from None
        return files

    def _vet(self, path: str, entry: dict[str, Any]) -> None:
        """Refuse a journal entry naming a file outside its package or a backup outside the
        journal's folder (the journal is read back from the host: it is not trusted blindly).

        Raises:
            TunerError: the entry names such a file (nothing is written).
        """
        backup = str(entry["backup"])
        if (path, backup) in self._vetted:
            return
        packages = (
            [str(entry["package"])]
            if entry.get("package")
            else sorted({p.package for p in self._known.values()})
        )
        inside = any(
            _within(path, self._package_dir(package, "(journal)")) for package in packages
        )
        if not inside or not _within(backup, self.journal_dir) or not backup.endswith(".orig"):
            where = " or ".join(packages) or "no known package"
            raise TunerError(
                f"{self.journal_path}: refused: it names {path} (backup {backup}), not a file "
                f"of package {where} with a backup in {self.journal_dir}; nothing was reverted: "
                f"check who wrote it, restore by hand if needed, then delete it"
            )
        self._vetted.add((path, backup))

    def _save(self, journal: dict[str, Any]) -> None:
        document = {"version": 1, "saved_at": time.time(), "files": journal}
        self.host.write_file(self.journal_path, json.dumps(document, indent=1).encode())

    def _backup(self, path: str, content: bytes, package: str) -> dict[str, Any]:
        backup = f"{self.journal_dir}/{_sha256(path.encode())[:16]}.orig"
        self.host.write_file(backup, content)
        if _sha256(self.host.read_file(backup)) != _sha256(content):
            raise TunerError(f"{backup}: the backup of {path} does not verify: check the disk")
        digest = _sha256(content)
        return {
            "package": package,
            "backup": backup,
            "original": digest,
            "current": digest,
            "expected": [digest],
            "applied": [],
            "steps": {},
        }

    def _check_ours(self, path: str, entry: dict[str, Any], digest: str) -> None:
        if digest not in entry["expected"]:
            raise TunerError(
                f"{path}: changed by someone else since the tuner patched it (sha256 {digest[:12]}"
                f"); the original is in {entry['backup']}: restore it by hand"
            )

    def _write_verified(self, path: str, data: bytes) -> None:
        self.host.write_file(path, data)
        if _sha256(self.host.read_file(path)) != _sha256(data):
            raise TunerError(f"{path}: the written file does not verify: check the disk")
        source = PurePosixPath(path)
        cache = source.parent / "__pycache__"
        if source.suffix == ".py" and self.host.exists(str(cache)):  # no stale bytecode
            self.host.run(
                f"rm -f -- {shlex.quote(str(cache))}/{shlex.quote(source.stem)}.*.pyc",
                timeout=30.0,
            )

    def _restore(self, path: str, entry: dict[str, Any], journal: dict[str, Any]) -> None:
        try:
            digest = _sha256(self.host.read_file(path))
        except HostError:
            digest = ""  # removed meanwhile: the backup puts it back
        if digest and digest != entry["original"]:
            self._check_ours(path, entry, digest)
        if digest != entry["original"]:
            self._write_verified(path, self.host.read_file(entry["backup"]))
        del journal[path]
        self._save(journal)
        self.host.run(f"rm -f -- {shlex.quote(entry['backup'])}", timeout=30.0)


def _within(path: str, folder: str) -> bool:
    """True if ``path`` is absolute, has no ``..`` and lies under ``folder``."""
    candidate = PurePosixPath(path)
    if not candidate.is_absolute() or ".." in candidate.parts:
        return False
    return PurePosixPath(folder) in candidate.parents


def _status(patch: PatchSpec, content: bytes, entry: dict[str, Any] | None) -> PatchStatus:
    if entry and patch.name in entry["applied"] and _sha256(content) == entry["current"]:
        return "applied"
    text = content.decode("utf-8", errors="surrogateescape")
    if text.count(patch.find) == 1:
        return "clean"
    if patch.find not in text and patch.replace in text:
        return "applied"
    return "mismatch"
