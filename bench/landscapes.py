"""Landscapes for the search benchmark: what a host would measure for each configuration.

A landscape maps a configuration of a search space to what one trial on a host shows: the
output tok/s of each concurrency level that ran, the failure class when it broke, and the
observations a real server gives (its log and telemetry: the KV pool at start, ``#running-req``
pinned at the cap, the queue, token usage). Strategies see only that, with noise; whether a
trial reached the target is judged on the noise-free value.

Three families:

- :class:`EmulatorLandscape`: the emulated GLM-5 host's performance model
  (:func:`tuner.emulator.perf_model.predict_throughput`), on ``glm5.yaml``'s emulated workload;
- :class:`GeneratedLandscape`: a landscape drawn per seed over ``glm5.yaml``'s parameters, with
  the same kinds of effects as the emulator's model (a MoE backend that only pays with its patch,
  a memory cliff with out of memory at start above it and under load just below it, a request
  cap that binds below the top concurrency, a KV pool that limits the batch, CUDA-graph batch
  sizes, interactions, start-up refusals, crashes under load, a wrong-output backend, noise of
  2-5%), but effect sizes, cliff positions and interactions drawn per seed; and the parallel and
  speculative dimensions of ``glm5.yaml`` (DP attention, expert parallelism, an all-to-all
  backend, NEXTN speculation: :class:`ParallelEffects`). Nobody tuned to them;
- :class:`ReplayLandscape`: a table measured once on a real engine (vLLM on this machine's
  CPU, ``bench/landscapes/vllm_cpu_tiny.json``), replayed; its space has only the measured values.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.space import Config, load_space
from tuner.study.record import reusable_failure

__all__ = [
    "Outcome",
    "Landscape",
    "EmulatorLandscape",
    "GeneratedLandscape",
    "ParallelEffects",
    "ReplayLandscape",
    "GLM5_SPACE",
    "REPLAY_SPACE",
    "REPLAY_TABLE",
]

REPO = Path(__file__).resolve().parents[1]
GLM5_SPACE = REPO / "search_spaces" / "glm5.yaml"
REPLAY_SPACE = REPO / "bench" / "landscapes" / "vllm-cpu-tiny-grid.yaml"
REPLAY_TABLE = REPO / "bench" / "landscapes" / "vllm_cpu_tiny.json"


@dataclass(frozen=True)
class Outcome:
    """What one configuration does on the host.

    ``levels``: (concurrency, output tok/s) of the levels that ran clean, in order;
    ``failure``: the tuner's failure class (``oom-at-start``, ``unstable-at-1024``, ...) or None;
    ``observations``: what the server said (names as in ``tuner.signals``).
    """

    levels: tuple[tuple[int, float], ...]
    failure: str | None
    observations: dict[str, float] = field(default_factory=dict)
    per_level: dict[int, dict[str, float]] = field(default_factory=dict)  # what each level's log shows
    # what the client measured at each level besides throughput (a replayed table's median TPOT)
    client: dict[int, dict[str, float]] = field(default_factory=dict)
    host_seconds: float | None = None  # a replayed row's measured start-up and levels

    @property
    def value(self) -> float | None:
        """The objective: the best level's throughput, None when the trial fails."""
        return None if self.failure or not self.levels else max(tps for _, tps in self.levels)

    @property
    def at_start(self) -> bool:
        """Failed before any level ran (start-up, out of memory at start, wrong output)."""
        return self.failure is not None and not self.levels


class Landscape:
    """A host's response to configurations: noise-free :meth:`outcome`, noisy :meth:`measured`."""

    name = "landscape"
    noise = 0.02  # relative standard deviation of one run (each level adds half of it)

    def __init__(self, space: Any, levels: tuple[int, ...], input_len: int, output_len: int) -> None:
        self.space = space
        self.levels = levels
        self.input_len = input_len
        self.output_len = output_len
        self._cache: dict[str, Outcome] = {}

    def outcome(self, config: Config) -> Outcome:
        key = config.key()
        if key not in self._cache:
            self._cache[key] = self._evaluate(config)
        return self._cache[key]

    def _evaluate(self, config: Config) -> Outcome:
        raise NotImplementedError

    def measured(self, config: Config, rng: random.Random) -> Outcome:
        """The outcome as one run measures it: run noise and level noise applied."""
        true = self.outcome(config)
        sigma = self.noise
        run = 1.0 + max(-2 * sigma, min(2 * sigma, rng.gauss(0.0, sigma)))
        levels = tuple(
            (c, tps * run * (1.0 + max(-sigma, min(sigma, rng.gauss(0.0, sigma / 2)))))
            for c, tps in true.levels
        )
        return Outcome(levels, true.failure, dict(true.observations), true.per_level, true.client, true.host_seconds)


# -- the emulator's model --------------------------------------------------------------------------

_START_FAILURES = {
    "refused": "startup-crash",
    "startup-crash": "startup-crash",
    "oom-at-start": "oom-at-start",
    "wrong-output": "wrong-output",
}


class EmulatorLandscape(Landscape):
    """The emulated GLM-5 host's performance model on ``glm5.yaml``'s emulated workload."""

    name = "emulator"
    noise = 0.02  # the emulator's: 2% a run, 1% a level

    def __init__(self, space: Any | None = None) -> None:
        space = space or load_space(GLM5_SPACE)
        workload = space.workload_for(True)
        super().__init__(space, tuple(workload.levels), workload.input_len, workload.output_len)
        self.workload = workload

    def _evaluate(self, config: Config) -> Outcome:
        from tuner.emulator.cli_args import parse_server_args
        from tuner.emulator.perf_model import Failure, build_engine, predict_throughput

        launch = self.space.render(config, command="sglang", local=True)
        args = parse_server_args(launch.argv[1:])
        gate, forced = "autotune_gate" in launch.patches, "force_allreduce_fusion" in launch.patches
        engine = build_engine(args, gate, forced)
        observations: dict[str, float] = {}
        per_level: dict[int, dict[str, float]] = {}
        if not isinstance(engine, Failure):
            settings = engine.settings
            per_request = self.input_len + settings.reserve_ratio * self.output_len
            per_level = {
                c: _load_observations(c, settings.max_running, settings.kv_tokens, per_request,
                                      self.input_len + self.output_len,
                                      settings.cuda_graph_max_bs if settings.cuda_graphs else 0)
                for c in self.levels
            }
            observations = per_level[self.levels[-1]]
        levels: list[tuple[int, float]] = []
        for concurrency in self.levels:
            result = predict_throughput(
                args, gate, forced, concurrency, self.input_len, self.output_len,
                num_requests=self.workload.requests_for(concurrency),
            )
            if isinstance(result, Failure):
                if result.kind in _START_FAILURES:
                    return Outcome((), _START_FAILURES[result.kind], observations, per_level)
                return Outcome(tuple(levels), f"unstable-at-{concurrency}", observations, per_level)
            levels.append((concurrency, result))
        return Outcome(tuple(levels), None, observations, per_level)


def _load_observations(
    concurrency: int, cap: int, kv_tokens: float, admit_tokens: float, hold_tokens: float,
    graph_bs: int = 0,
) -> dict[str, float]:
    """What the server log shows at a level: the KV pool (at start), the cap, how often
    ``#running-req`` sat at the cap, the peak token usage, whether the queue kept growing, and
    the largest batch the CUDA graphs cover (``graph_max_bs``, 0 without graphs: the decode lines
    of larger batches say ``cuda graph: False``)."""
    by_kv = max(1, int(kv_tokens // admit_tokens))
    running = min(concurrency, cap, by_kv)
    return {
        "graph_max_bs": float(graph_bs),
        "kv_tokens": float(int(kv_tokens)),
        "max_running_requests": float(cap),
        "running_req_max": float(running),
        "running_req_at_cap_fraction": 0.93 if running >= cap else 0.0,
        "token_usage_max": round(min(1.0, running * hold_tokens / max(1.0, kv_tokens)), 3),
        "queue_growing": 1.0 if running < concurrency else 0.0,
    }


# -- generated landscapes ----------------------------------------------------------------------------


class GeneratedLandscape(Landscape):
    """A landscape over ``glm5.yaml``'s parameters whose effects are drawn from ``seed``.

    Throughput at a level of ``c`` requests: ``peak * b / (b + half)`` times the product of the
    configuration's factors, where the running batch ``b = min(c, cap, KV pool / tokens a
    request reserves)``. The KV pool grows with ``mem_fraction_static`` and shrinks with the
    CUDA graphs' memory (``cuda_graph_max_bs``) and a wider KV dtype; batches above the captured
    graph size run eagerly. Failures: out of memory at start at or above a drawn cliff, and under
    load in a drawn band just below it (at levels whose batch is large); a drawn MoE backend and
    KV dtype refused at start; a drawn attention backend serving garbage; CUDA graphs off with a
    drawn attention backend crashing under load; forced allreduce fusion either a slow path or
    a small gain.
    """

    name = "generated"

    def __init__(self, seed: int, space: Any | None = None) -> None:
        space = space or load_space(GLM5_SPACE)
        workload = space.workload_for(True)
        super().__init__(space, tuple(workload.levels), workload.input_len, workload.output_len)
        self.seed = seed
        self.workload = workload
        rng = random.Random(f"landscape:{seed}")
        params = space.parameters
        self.noise = rng.uniform(0.02, 0.05)
        self.peak = rng.uniform(2500.0, 5000.0)
        self.half = rng.uniform(60.0, 300.0)  # batch at which half the peak is reached
        moe = list(params["moe_runner_backend"].options())
        self.moe = {name: rng.uniform(0.5, 0.95) for name in moe}
        self.moe_patch_gain = rng.uniform(1.2, 1.7)  # flashinfer_cutlass pays with its patch only
        self.moe["flashinfer_cutlass"] = rng.uniform(0.7, 0.9)
        refusable = [m for m in moe if m not in ("flashinfer_cutlass", space.baseline["moe_runner_backend"])]
        self.refused_moe = rng.choice(refusable) if rng.random() < 0.6 else None
        attention = list(params["attention_backend"].options())
        others = [a for a in attention if a != space.baseline["attention_backend"]]
        self.attention = {name: rng.uniform(0.85, 1.0) for name in attention}
        self.attention[rng.choice(attention)] = 1.0
        self.garbage_attention = rng.choice(others) if rng.random() < 0.7 else None
        self.eager = rng.uniform(0.55, 0.85)  # speed of a batch that runs without CUDA graphs
        self.graphs_off_crash = rng.choice(attention)  # graphs off + this backend: crash under load
        self.graphs_off_crash_batch = rng.choice([200, 500, 900])
        self.graph_memory = rng.uniform(0.0, 0.08)  # share of the KV pool the 512-batch graphs take
        self.default_graph_bs = 512
        self.default_cap = 2048
        base_mem = space.baseline["mem_fraction_static"]  # the baseline runs today: it starts
        self.start_cliff = rng.choice([c for c in (0.92, 0.93, 0.94, 0.95, 0.96) if c > base_mem + 0.005])
        self.load_band = rng.choice([0.0, 0.01, 0.02])  # below the start cliff: OOM under load
        self.oom_batch = rng.choice([400, 700, 1000])
        best_safe = self.start_cliff - self.load_band - 0.01
        need = rng.uniform(0.9, 1.6) * max(self.levels) * (self.input_len + self.output_len)
        self.kv_per_fraction = need / max(0.05, best_safe - 0.40)  # tokens per unit above 0.40
        self.sched_gain = rng.uniform(0.0, 0.15)  # lower conservativeness admits more
        self.evict_below = rng.uniform(0.3, 0.8)  # ... until requests are evicted
        self.evict_cost = rng.uniform(0.2, 0.8)
        self.chunked = {c: rng.uniform(0.88, 1.04) for c in params["chunked_prefill_size"].options()}
        self.chunked[None] = 1.0
        self.kv_dtype_tokens = {None: 1.0, "fp8_e4m3": 1.0, "bf16": rng.uniform(0.5, 0.9)}
        self.kv_dtype_speed = {None: 1.0, "fp8_e4m3": 1.0, "bf16": rng.uniform(0.98, 1.05)}
        self.refused_kv_dtype = "bf16" if rng.random() < 0.2 else None
        self.radix_off = rng.uniform(0.98, 1.05)
        self.forced_fusion = rng.uniform(0.2, 0.3) if rng.random() < 0.5 else rng.uniform(1.0, 1.06)
        choices = [
            (name, value)
            for name in ("moe_runner_backend", "attention_backend", "chunked_prefill_size",
                         "cuda_graph_max_bs", "kv_cache_dtype", "radix_cache")
            for value in params[name].options()
        ]
        self.interactions = []
        for _ in range(2):
            (a, va), (b, vb) = rng.sample(choices, 2)
            if a != b:
                self.interactions.append((a, va, b, vb, rng.uniform(0.8, 1.2)))
        # drawn from a stream of their own, so the effects above draw the values they draw alone
        self.parallel = ParallelEffects(random.Random(f"landscape-parallel:{seed}"))

    def describe(self) -> str:
        """The drawn effects in one line (for reading a trace, never for a strategy)."""
        return (
            f"seed {self.seed}: noise {self.noise:.1%}, start cliff {self.start_cliff}, load band "
            f"{self.load_band}, patch gain {self.moe_patch_gain:.2f}, refused moe {self.refused_moe}, "
            f"garbage attention {self.garbage_attention}, interactions {self.interactions}; "
            f"{self.parallel.describe()}"
        )

    def _in_use(self, name: str, value: Any) -> Any:
        """The value of ``name`` the server runs with: an unset ``--cuda-graph-max-bs``
        captures up to 512 batches, the same server as ``512`` named (the engine profile's
        ``value_in_use``), so an interaction drawn on either holds for both."""
        return self.default_graph_bs if name == "cuda_graph_max_bs" and value is None else value

    def _kv_tokens(self, config: Config) -> float:
        mem = config["mem_fraction_static"]
        tokens = self.kv_per_fraction * max(0.0, mem - 0.40)
        tokens *= self.kv_dtype_tokens[config.get("kv_cache_dtype")]
        if config.get("cuda_graph"):
            graph_bs = config.get("cuda_graph_max_bs") or self.default_graph_bs
            tokens *= 1.0 - self.graph_memory * graph_bs / 512
        return tokens * self.parallel.kv_share(config)

    def _factor(self, config: Config, batch: int) -> float:
        factor = self.moe[config["moe_runner_backend"]]
        if config["moe_runner_backend"] == "flashinfer_cutlass" and config.get("autotune_gate"):
            factor *= self.moe_patch_gain
        factor *= self.attention[config["attention_backend"]]
        graph_bs = (config.get("cuda_graph_max_bs") or self.default_graph_bs) if config["cuda_graph"] else 0
        if batch > graph_bs:
            factor *= (graph_bs + (batch - graph_bs) * self.eager) / batch
        sched = config.get("schedule_conservativeness")
        sched = 1.0 if sched is None else sched
        factor *= 1.0 + self.sched_gain * (1.0 - sched) / 0.7
        if sched < self.evict_below:
            factor *= 1.0 - self.evict_cost * (self.evict_below - sched)
        factor *= self.chunked[config.get("chunked_prefill_size")]
        factor *= self.kv_dtype_speed[config.get("kv_cache_dtype")]
        if config.get("radix_cache") is False:
            factor *= self.radix_off
        if config.get("force_allreduce_fusion"):
            factor *= self.forced_fusion
        for a, va, b, vb, gain in self.interactions:
            if all(self._in_use(name, config.get(name, "<inactive>")) == self._in_use(name, drawn)
                   for name, drawn in ((a, va), (b, vb))):
                factor *= gain
        return factor * self.parallel.speed(config, batch)

    def _evaluate(self, config: Config) -> Outcome:
        mem = config["mem_fraction_static"]
        if config["moe_runner_backend"] == self.refused_moe or (
            self.refused_kv_dtype is not None and config.get("kv_cache_dtype") == self.refused_kv_dtype
        ):
            return Outcome((), "startup-crash")
        refused = self.parallel.refused(config)
        if refused:
            return Outcome((), refused)
        if mem >= self.start_cliff - 1e-9:
            return Outcome((), "oom-at-start")
        kv_tokens = self._kv_tokens(config)
        cap = config.get("max_running_requests") or self.parallel.default_cap(config, self.default_cap)
        graph_bs = (config.get("cuda_graph_max_bs") or self.default_graph_bs) if config["cuda_graph"] else 0
        sched = config.get("schedule_conservativeness")
        admit = self.input_len + (1.0 if sched is None else max(0.5, sched)) * self.output_len
        per_level = {
            c: _load_observations(c, cap, kv_tokens, admit, self.input_len + self.output_len, graph_bs)
            for c in self.levels
        }
        observations = per_level[self.levels[-1]]
        if config["attention_backend"] == self.garbage_attention:
            return Outcome((), "wrong-output", observations, per_level)
        levels: list[tuple[int, float]] = []
        for concurrency in self.levels:
            batch = max(1, min(concurrency, cap, int(kv_tokens // admit)))
            crashes = (
                not config["cuda_graph"]
                and config["attention_backend"] == self.graphs_off_crash
                and batch >= self.graphs_off_crash_batch
            ) or (mem >= self.start_cliff - self.load_band - 1e-9 and batch >= self.oom_batch)
            if crashes:
                return Outcome(tuple(levels), f"unstable-at-{concurrency}", observations, per_level)
            tps = self.peak * batch / (batch + self.half) * self._factor(config, batch)
            levels.append((concurrency, tps))
        return Outcome(tuple(levels), None, observations, per_level)


class ParallelEffects:
    """The parallel and speculative dimensions of ``glm5.yaml`` on a generated landscape, drawn
    per seed with the kinds of effect of the emulator's model (``tuner/emulator/parallelism.py``,
    ``speculative.py``), sizes drawn:

    - DP attention of size ``d``: slower at small batches, faster at large ones (a speed that runs
      from ``dp_low`` at one request to ``dp_high`` at 1,024 on a log scale, its difference to 1
      scaled by ``(d - 1) / 7``), and a KV pool up to ``1 + dp_kv`` times larger at ``d = 8``
      (each rank holds its requests' cache); SGLang's x0.3 on the schedule conservativeness is
      left out;
    - expert parallelism (``--ep-size 8``, no all-to-all): ``ep_low`` to ``ep_high`` alike;
    - the DeepEP all-to-all: refused at start on most hosts (no NVLink between PCIe cards:
      ``deepep_refused``), else a flat factor; two-batch overlap (it needs one) another;
    - NEXTN speculation: an acceptance length from a drawn first-token acceptance and its decay
      with depth (the emulator's formula), and a round that costs ``1 + steps x draft`` target
      steps at small batches (memory-bound) and ``draft tokens + steps x draft x top-k`` at
      large ones (compute-bound), the two blended at a drawn knee: a gain at low concurrency
      that turns into a loss as the batch grows; its memory comes from the KV pool; an unset
      cap becomes 48 (SGLang 0.5.9);
    - a tensor-parallel size other than 8: out of memory at start (4) or refused (6: the heads
      do not split); the space's ``fit:`` refuses both before any host time.
    """

    def __init__(self, rng: random.Random) -> None:
        self.dp_low = rng.uniform(0.6, 0.85)
        self.dp_high = rng.uniform(0.92, 1.15)
        self.dp_kv = rng.uniform(0.0, 1.0)
        self.ep_low = rng.uniform(0.9, 1.0)
        self.ep_high = rng.uniform(0.97, 1.06)
        self.deepep_refused = rng.random() < 0.8
        self.deepep = rng.uniform(0.95, 1.15)
        self.tbo = rng.uniform(0.97, 1.08)
        self.accept_first = rng.uniform(0.6, 0.9)
        self.accept_decay = rng.uniform(0.75, 0.92)
        self.spec_knee = rng.uniform(32.0, 256.0)
        self.draft_share = rng.uniform(0.08, 0.2)
        self.spec_memory = rng.uniform(0.0, 0.05)

    def describe(self) -> str:
        return (f"dp attention {self.dp_low:.2f}-{self.dp_high:.2f} (kv +{self.dp_kv:.0%} at 8), ep "
                f"{self.ep_low:.2f}-{self.ep_high:.2f}, deepep {'refused' if self.deepep_refused else f'{self.deepep:.2f}'}, "
                f"accept {self.accept_first:.2f} x {self.accept_decay:.2f}, spec knee {self.spec_knee:.0f}")

    @staticmethod
    def _dp(config: Config) -> int:
        return int(config.get("dp_size") or 1) if config.get("dp_attention") else 1

    def refused(self, config: Config) -> str | None:
        """The failure at start of the parallel flags (None: they start)."""
        tp = config.get("tp_size") or 8
        if tp < 8:
            return "oom-at-start"  # the weights do not fit
        if 64 % (tp // self._dp(config)):
            return "startup-crash"  # the attention heads do not split
        if config.get("moe_a2a_backend") == "deepep" and self.deepep_refused:
            return "startup-crash"
        return None

    def default_cap(self, config: Config, cap: int) -> int:
        """The cap of an unset ``--max-running-requests`` (48 with speculation: SGLang 0.5.9)."""
        return 48 if config.get("speculative_algorithm") else cap

    def kv_share(self, config: Config) -> float:
        """The KV pool against the TP8 layout without speculation."""
        share = 1.0 + self.dp_kv * (self._dp(config) - 1) / 7
        return share * (1.0 - self.spec_memory if config.get("speculative_algorithm") else 1.0)

    @staticmethod
    def _along(low: float, high: float, batch: int) -> float:
        return low + (high - low) * min(1.0, math.log2(max(1, batch)) / 10)

    def speed(self, config: Config, batch: int) -> float:
        """The decode rate against TP8 without DP attention, EP or speculation, at ``batch``."""
        speed = 1.0
        dp = self._dp(config)
        if dp > 1:
            speed *= 1.0 + (self._along(self.dp_low, self.dp_high, batch) - 1.0) * (dp - 1) / 7
        if config.get("ep_size") and config.get("moe_a2a_backend") is None:
            speed *= self._along(self.ep_low, self.ep_high, batch)
        if config.get("moe_a2a_backend") == "deepep":
            speed *= self.deepep * (self.tbo if config.get("two_batch_overlap") else 1.0)
        if config.get("speculative_algorithm"):
            speed *= self._speculation(config, batch)
        return speed

    def _speculation(self, config: Config, batch: int) -> float:
        steps = int(config.get("speculative_num_steps") or 3)
        topk = int(config.get("speculative_eagle_topk") or 1)
        draft = steps + 1 if topk == 1 else int(config.get("speculative_num_draft_tokens") or steps + 1)
        depth = max(1, min(steps, draft - 1))
        width = max(1.0, min(float(topk), (draft - 1) / depth))
        run, length = 1.0, 1.0
        for k in range(depth):
            run *= 1.0 - (1.0 - self.accept_first * self.accept_decay ** k) ** width
            length += run
        small = 1.0 + steps * self.draft_share
        large = draft + steps * self.draft_share * topk
        w = batch / (batch + self.spec_knee)
        return length / ((1.0 - w) * small + w * large)


# -- a replayed real landscape -------------------------------------------------------------------


class ReplayLandscape(Landscape):
    """A table measured once on a real engine, replayed (only its measured configurations exist
    in its space). Noise: the spread the measurement itself showed is already in the table; each
    replayed run adds 3%."""

    name = "vllm-replay"
    noise = 0.03

    def __init__(self, table: Path = REPLAY_TABLE, space_path: Path = REPLAY_SPACE) -> None:
        space = load_space(space_path)
        workload = space.workload_for(False)
        super().__init__(space, tuple(workload.levels), workload.input_len, workload.output_len)
        self.workload = workload
        self.table: dict[str, Outcome] = {}
        for row in json.loads(Path(table).read_text()):
            if row.get("reused_from") is not None or row.get("state") not in ("COMPLETE", "FAIL", "PRUNED"):
                continue
            values = {k: v for k, v in _config_of(row).items() if k in space.parameters}
            config = space.config(values, drop_inactive=True)
            outcome = _row_outcome(row, space.workload_for(False).levels)
            if outcome is not None:
                self.table[config.key()] = outcome

    def _evaluate(self, config: Config) -> Outcome:
        found = self.table.get(config.key())
        if found is None:
            raise KeyError(f"not measured: {config.describe()}")
        return found


def _config_of(row: dict[str, Any]) -> dict[str, Any]:
    if isinstance(row.get("config"), dict):
        return dict(row["config"])
    return {
        k.removeprefix("config."): None if v == "unset" else v
        for k, v in row.items()
        if k.startswith("config.") and v is not None
    }


def _row_outcome(row: dict[str, Any], levels: tuple[int, ...] | list[int]) -> Outcome | None:
    """One measured row as an outcome (None: a configuration the constraint skipped)."""
    if row.get("state") == "PRUNED" and row.get("pruned_by") == "constraint":
        return None
    measured = []
    for concurrency in levels:
        tps = row.get(f"tps@{concurrency}")
        if tps is None or (isinstance(tps, float) and math.isnan(tps)):
            break
        if row.get(f"measurement_bound@{concurrency}"):  # the client's figure, not the server's
            break
        measured.append((concurrency, float(tps)))
    failure = (row.get("failure_reason") or row.get("reason")) if row.get("state") == "FAIL" else None
    if row.get("state") == "FAIL" and not reusable_failure(failure):
        return None  # the run's fault (interrupted, host error): says nothing of the configuration
    observations = {k: float(v) for k, v in (row.get("observations") or {}).items() if v is not None}
    per_level: dict[int, dict[str, float]] = {}
    for key, value in observations.items():
        name, _, at = key.rpartition("@")
        if name and at.isdigit():
            per_level.setdefault(int(at), {})[name] = value
    for seen in per_level.values():
        if "kv_tokens" in observations:
            seen.setdefault("kv_tokens", observations["kv_tokens"])
    client = {c: {name: float(row[f"{name}@{c}"]) for name in ("median_tpot_ms", "median_ttft_ms")
                  if isinstance(row.get(f"{name}@{c}"), (int, float))} for c, _ in measured}
    host_seconds = row.get("host_seconds")
    return Outcome(tuple(measured), failure, observations, per_level, client,
                   float(host_seconds) if isinstance(host_seconds, (int, float)) else None)
