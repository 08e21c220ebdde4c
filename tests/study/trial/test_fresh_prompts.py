"""Fresh prompts at every level: no two levels of a trial send the same prompt (a server's prefix
cache would serve the later one without prefilling it), a dataset's sample is drawn without
replacement while it lasts and a level says how many prompts came again, and warm-ups send none
of the measured prompts. The levels are made by the study's own loops (the goodput search and
the trial runner's concurrency levels) and sent by the real client to a real server on
127.0.0.1, which records a digest of every prompt it received."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from tests.loadgen.conftest import pacing_server  # noqa: F401 (the fixture)
from tests.support.tuner_bench import tuner_bench
from tests.support.space import GLM5
from tests.support.trial_session import SearchSession
from tuner.errors import ServerFailure
from tuner.loadgen import LevelMetrics, LevelSpec, load_file_pool, run_level
from tuner.space import load_space
from tuner.study.trial import TrialRunner, measure_goodput, request_source
from tuner.timescale import TimeScale

OUTPUT_LEN = 24  # warm-up requests ask for 16 tokens: the server's record tells them apart


def _jsonl(path: Path, prompts: int) -> Path:
    lines = [{"prompt": f"question {i}: " + "why " * (i % 7), "output_len": OUTPUT_LEN}
             for i in range(prompts)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _stats(url: str, reset: bool = False) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
        records = json.load(answer)["records"]
    if reset:
        urllib.request.urlopen(f"{url}/stats/reset", timeout=10).close()
    return records


def _space(tmp_path: Path, workload: dict[str, Any], objective: dict[str, Any] | None = None):  # noqa: ANN202
    document = yaml.safe_load(GLM5.read_text())
    document["workload"].update(workload)
    if objective is not None:
        document["objective"] = objective
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load_space(path)


class _Served:
    """The one measurement hook of a trial runner (``_run_level``) as the real client against
    the server at ``url``; what the server received during each level is kept, per level."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.received: list[list[dict[str, Any]]] = []
        self.specs: list[LevelSpec] = []

    def run(self, spec: LevelSpec) -> LevelMetrics:
        _stats(self.url, reset=True)
        metrics = asyncio.run(run_level(self.url, spec, api="sglang", time_scale=TimeScale()))
        self.received.append(_stats(self.url))
        self.specs.append(spec)
        return metrics


def _assert_fresh(received: list[list[dict[str, Any]]], pool: int | None = None) -> None:
    """Measured prompts: none sent twice within the trial (while the pool lasts); warm-ups:
    none of the measured prompts."""
    measured = [[r["prompt_digest"] for r in level if r["max_tokens"] == OUTPUT_LEN] for level in received]
    warm = {r["prompt_digest"] for level in received for r in level if r["max_tokens"] != OUTPUT_LEN}
    assert len(measured) >= 2 and all(measured), [len(m) for m in measured]
    every = [digest for level in measured for digest in level]
    assert pool is None or len(every) <= pool
    for k, level in enumerate(measured):
        earlier = {digest for before in measured[:k] for digest in before}
        again = earlier & set(level)
        assert not again, f"level {k + 1} repeats {len(again)} prompts of earlier levels"
    assert len(set(every)) == len(every), "a prompt was sent twice within a level"
    assert warm and not warm & set(every), "a warm-up sent a measured prompt"


class _GoodputRunner:
    """What :func:`measure_goodput` reads of a trial runner, measuring on a real server."""

    def __init__(self, space, study, url: str, source: Any) -> None:  # noqa: ANN001
        self.space, self.study, self.requests = space, study, source
        profile = type("Profile", (), {"running_cap": staticmethod(lambda argv: None)})()
        self.target = type("Target", (), {"time_scale": TimeScale(), "profile": profile, "client_workers": 1})()
        self.served = _Served(url)
        self.on_phase = lambda text: None
        self.on_level = lambda metrics, k, n: None

    def _run_level(self, session, spec, workers=None):  # noqa: ANN001, ANN202
        return self.served.run(spec), None


@pytest.mark.parametrize("dataset", ["random tokens", "a file of 2,000 prompts"])
def test_the_rate_levels_of_a_goodput_trial_send_fresh_prompts(pacing_server, tmp_path: Path,  # noqa: F811
                                                               dataset: str) -> None:
    """Each rate level of a trial sends prompts no other level sent, though its concurrency (the
    workload's ``max_concurrency``) is the same at every rate: prompts resent would be served from
    the prefix cache. From a file, no prompt is sent twice while its sample lasts."""
    server = pacing_server(ttft_ms=0, itl_ms=0)
    workload = {"input_len": 32, "output_len": OUTPUT_LEN, "warmup": 4, "max_concurrency": 64,
                "requests_per_level": {"per_concurrency": 1, "min": 8}, "rate_level_s": 1}
    if dataset != "random tokens":
        workload["dataset"] = {"path": str(_jsonl(tmp_path / "mine.jsonl", 2000))}
    objective = {"metric": "goodput", "slo": {"p99_ttft_ms": 60000},
                 "goodput": {"start_rate": 16, "max_levels": 3}}
    space = _space(tmp_path, workload, objective)
    source = request_source(space.workload_for(False), space.path)
    runner = _GoodputRunner(space, optuna.create_study(direction="maximize"), server.url, source)
    trial = runner.study.ask()
    try:
        measure_goodput(runner, trial, SearchSession(), space.workload_for(False))
    except (ServerFailure, optuna.TrialPruned):  # how the levels were judged is not the point
        pass
    assert len({spec.request_rate for spec in runner.served.specs}) == len(runner.served.specs) >= 2
    _assert_fresh(runner.served.received, pool=2000 if source is not None else None)


class _ClosedRunner(TrialRunner):
    """The trial runner, its levels measured by the real client on a real server (no GPU
    telemetry: ``_run_level`` is the one hook the search benchmark's model host replaces too)."""

    served: _Served

    def _run_level(self, session, spec, workers=None):  # noqa: ANN001, ANN202
        return self.served.run(spec), None


def test_the_concurrency_levels_of_a_trial_share_no_prompt_of_a_file(pacing_server, tmp_path: Path) -> None:  # noqa: F811
    """The concurrency levels of a trial take consecutive places in one stream of the file's
    sample: levels of 64 and 32 requests drawn with replacement from a sample of 200 would share
    about 10 prompts."""
    server = pacing_server(ttft_ms=50, itl_ms=2)  # slots busy long enough for a busy client
    workload = {"levels": [16, 32], "input_len": 32, "output_len": OUTPUT_LEN, "warmup": 4,
                "requests_per_level": {"per_concurrency": 2, "min": 8},
                "dataset": {"path": str(_jsonl(tmp_path / "mine.jsonl", 200))}}
    space = _space(tmp_path, workload)
    profile = type("Profile", (), {"running_cap": staticmethod(lambda argv: None), "api": "sglang"})()
    target = type("Target", (), {"time_scale": TimeScale(), "profile": profile, "client_workers": 1})()
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.NopPruner())
    runner = _ClosedRunner(space, target, None, study, tmp_path,  # type: ignore[arg-type]
                           requests=request_source(space.workload_for(False), space.path))
    runner.served = _Served(server.url)
    trial = study.ask()
    try:
        runner._measure(trial, SearchSession(), space.workload_for(False))
    except ServerFailure as failure:  # a busy machine's client may measure itself: not the point
        assert failure.reason == "measurement-bound", failure
    # a level the busy client under-drove runs again with more client processes, on fresh prompts
    ran = [spec.concurrency for spec in runner.served.specs]
    assert sorted(set(ran), reverse=True) == [32, 16] and ran[0] == 32 and ran[-1] == 16, ran
    _assert_fresh(runner.served.received, pool=200)


def test_a_level_of_2048_from_a_sample_of_2000_repeats_exactly_48(tmp_path: Path) -> None:
    pool = load_file_pool(_jsonl(tmp_path / "mine.jsonl", 2000))
    picked = pool.pick(2048, [5, 0], "openai")
    assert len(set(picked.prompts)) == 2000 and picked.repeated == 48
    # The next level of the trial begins where this one ended: every prompt there came before.
    assert pool.pick(100, [5, 0], "openai", first=2048).repeated == 100
    # A level inside the sample repeats none, and two such levels share none.
    first, second = pool.pick(700, [5, 0], "openai"), pool.pick(1300, [5, 0], "openai", first=700)
    assert first.repeated == second.repeated == 0 and not set(first.prompts) & set(second.prompts)


def test_a_level_says_how_many_prompts_came_again(pacing_server, tmp_path: Path) -> None:  # noqa: F811
    """`tuner bench --dataset` with a level of 128 from a sample of 100: 28 prompts sent twice,
    as the server counts them, and the level's figures say so."""
    server = pacing_server(ttft_ms=0, itl_ms=0)
    dataset = _jsonl(tmp_path / "small.jsonl", 100)
    common = [server.url, "--dataset", str(dataset), "--concurrency", "16", "--num-prompts", "128",
              "--output-len", "4", "--warmup", "0"]
    shown = tuner_bench(*common)
    assert shown.returncode == 0, shown.stderr
    assert "28 prompts repeated" in shown.stderr
    received = [r["prompt_digest"] for r in _stats(server.url, reset=True)]
    assert len(received) == 128 and len(set(received)) == 100
    document = json.loads(tuner_bench(*common, "--json").stdout)
    assert document["levels"][0]["repeated_prompts"] == 28
