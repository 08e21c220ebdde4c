"""Fixtures of the whole-study tests: variants of search_spaces/glm5.yaml run on the emulator."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.leftovers import stop_servers_left_in
from tests.support.sshd import free_port

REPO = Path(__file__).resolve().parents[2]
GLM5 = REPO / "search_spaces" / "glm5.yaml"

# The calibration configurations (tests/fixtures/reference/calibration.md) in glm5.yaml's parameters.
N_OFF = {
    "moe_runner_backend": "flashinfer_cutlass",
    "autotune_gate": True,
    "cuda_graph": False,
    "max_running_requests": None,
    "attention_backend": "flashinfer",
    "allreduce_fusion": False,
    "mem_fraction_static": 0.92,
    "chunked_prefill_size": None,
    "schedule_conservativeness": None,
    "kv_cache_dtype": None,
    "radix_cache": True,
    # the parallel and speculative dimensions at the baseline's (a trial's config holds them all)
    "tp_size": 8,
    "dp_attention": False,
    "ep_size": None,
    "moe_a2a_backend": None,
    "speculative_algorithm": None,
}
N_ON = {**N_OFF, "cuda_graph": True, "cuda_graph_max_bs": None}


class EmulatedStudy:
    """A search space written to ``tmp_path`` and the tuner run on it with ``--emulate``."""

    def __init__(self, tmp_path: Path, name: str = "glm5t", **overrides: Any) -> None:
        self.dir = tmp_path
        document = yaml.safe_load(GLM5.read_text())
        document["name"] = name
        document.setdefault("workload", {}).setdefault("emulated", {})
        for key, value in overrides.items():
            section, _, field = key.partition("__")
            if field:
                document.setdefault(section, {})[field] = value
            else:
                document[section] = value
        self.path = tmp_path / f"{name}.yaml"
        self.path.write_text(yaml.safe_dump(document, sort_keys=False))
        self.db = tmp_path / "studies" / f"{name}-emulated.db"
        self.storage = str(self.db)  # the default: an Optuna journal file
        self.port = free_port()
        self.name = name

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 300,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "tuner", *args]
        result = subprocess.run(
            command, cwd=self.dir, capture_output=True, text=True, timeout=timeout,
            env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result

    def optimize(self, trials: int, *extra: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.run("optimize", str(self.path), "--trials", str(trials), "--emulate",
                        "--port", str(self.port), "--seed", "7", *extra, **kwargs)

    def enqueue(self, config: dict[str, Any]) -> None:
        sets = [f"--set={k}={'null' if v is None else str(v).lower() if isinstance(v, bool) else v}"
                for k, v in config.items()]
        self.run("enqueue", str(self.path), "--emulate", *sets)

    def study(self):  # noqa: ANN201
        import optuna

        from tuner.study.storage import open_storage

        return optuna.load_study(study_name=self.name, storage=open_storage(self.storage))


@pytest.fixture
def emulated_study(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., EmulatedStudy]]:
    """Make an :class:`EmulatedStudy` with overrides of glm5.yaml's sections. Afterwards, a
    server the test left running is stopped (a failed test must not leave one for later tests),
    and a test that passed but left one fails: the tuner leaves no server running."""
    yield lambda **overrides: EmulatedStudy(tmp_path, **overrides)
    left = stop_servers_left_in(tmp_path)
    outcome = getattr(request.node, "rep_call", None)
    if left and outcome is not None and outcome.passed:
        pytest.fail(f"the test passed but left servers running (now stopped): {', '.join(left)}")
