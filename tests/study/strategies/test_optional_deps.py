"""A sampler that needs an optional package says so at once, naming the extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.study.conftest import GLM5, REPO
from tuner.errors import ConfigError
from tuner.study.strategies._optional_deps import (
    EXTRAS,
    SAMPLER_EXTRAS,
    require_extra,
    require_sampler,
)

# Runs the CLI with the given modules made unimportable (sys.modules[name] = None).
WITHOUT = ("import sys\nfor name in sys.argv.pop(1).split(','): sys.modules[name] = None\n"
           "from tuner.cli import main\nsys.argv[0] = 'tuner'\nmain()\n")


def tuner_without(tmp_path: Path, modules: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT, modules, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env=dict(os.environ), check=False)


@pytest.mark.parametrize(("sampler", "module"), [("gp", "torch"), ("cmaes", "cmaes")])
def test_a_sampler_without_its_package_stops_before_any_host_time(tmp_path: Path, sampler: str,
                                                                  module: str) -> None:
    result = tuner_without(tmp_path, module, "optimize", str(GLM5), "--emulate", "--trials", "3",
                           "--sampler", sampler)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [f"tuner: error: --sampler {sampler} needs {module}, not installed here; "
                     f"fix: pip install 'tuner[{sampler}]' (or pip install {module}), or drop "
                     f"--sampler {sampler}"]
    assert not (tmp_path / "studies").exists()  # no study, no emulated host made


def test_the_dry_run_checks_it_too(tmp_path: Path) -> None:
    result = tuner_without(tmp_path, "cmaes", "optimize", str(GLM5), "--dry-run", "--emulate",
                           "--sampler", "cmaes")
    assert result.returncode == 2 and "tuner[cmaes]" in result.stderr


def test_each_extra_is_declared_in_pyproject() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for extra, modules in EXTRAS.items():
        packages = " ".join(declared[extra])
        assert all(module in packages for module in modules), (extra, declared[extra])
    assert set(SAMPLER_EXTRAS.values()) <= set(EXTRAS)


def test_present_modules_pass_and_samplers_without_extras_need_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EXTRAS, "gp", ("json", "math"))
    require_extra("gp", "--sampler gp")
    for name in ("tpe", "random", "qmc", "nsga2", "bruteforce"):
        require_sampler(name)
    monkeypatch.setitem(sys.modules, "math", None)
    with pytest.raises(ConfigError, match=r"needs math, not installed here"):
        require_extra("gp", "--strategy model")
