"""The :class:`PatchSpec` a search space hands to the patch manager.

``tuner.patches`` (the patch manager) owns the class; until that module exists this one defines
the same frozen dataclass, so that the search space can be loaded on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PatchSpec"]

try:
    from tuner.patches import PatchSpec
except ModuleNotFoundError as missing:  # tuner/patches.py not written yet
    if missing.name != "tuner.patches":
        raise

    @dataclass(frozen=True)
    class PatchSpec:  # type: ignore[no-redef]
        """A source patch: in ``<package dir>/<file>``, replace ``find`` (present once) by
        ``replace``."""

        name: str
        package: str
        file: str
        find: str
        replace: str
        description: str = ""
