"""Every name a ``tuner`` package lists in ``__all__`` is bound in it.

Some rooms (``tuner.study.trial``, ``tuner.study.storage``) build their ``__all__`` from their
modules' own lists, so that a public name is listed once; the names are still imported one by one
in the ``__init__``. This catches a name added to a module's list and not imported.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "tuner"
PACKAGES = sorted(
    ".".join(init.relative_to(PACKAGE_ROOT.parent).parent.parts)
    for init in PACKAGE_ROOT.rglob("__init__.py")
)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_listed_name_is_bound(package: str) -> None:
    module = importlib.import_module(package)
    listed = getattr(module, "__all__", [])
    assert len(listed) == len(set(listed)), f"{package}.__all__ lists a name twice"
    unbound = [name for name in listed if not hasattr(module, name)]
    assert not unbound, f"{package}.__all__ lists names it does not bind: {unbound}"


def test_the_derived_lists_hold_every_name_of_their_modules() -> None:
    from tuner.study import storage, trial

    assert "create_or_resume" in storage.__all__ and "worker_id" in storage.__all__
    assert "FeasibilityGate" in trial.__all__ and "run_outcome" in trial.__all__
