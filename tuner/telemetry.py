"""GPU telemetry: ``nvidia-smi`` CSV parsing and a sampler that runs during a benchmark level.

:class:`GpuSampler` starts ONE long-running ``nvidia-smi --query-gpu=... -lms N`` on the host, as a
detached process with its own output file, and summarises what it wrote when the level ends:
mean and max power per GPU, the power of all the server's GPUs together (``total_power_w``:
the per-GPU mean times the GPUs sampled), the power limit, utilisation and memory; a sampler
given the server's GPUs (``gpus``) keeps only their rows. The level starts once the first row
is written, and the idle ticks before its first request and after its last answer are not
counted (:func:`busy_span`). A host without ``nvidia-smi``
gives no summary and no error. :func:`under_utilised` flags a level whose GPUs stayed under half
their power limit (the seeds' 250 W of 600 W).
"""

from __future__ import annotations

import re
import shlex
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import fmean
from typing import Any, Self

from tuner.errors import HostError
from tuner.host import READ_BACK_S, Host, ServerHandle
from tuner.interrupts import CleanUpAbandoned

__all__ = [
    "SAMPLER_FIELDS",
    "SAMPLE_MS",
    "GpuSample",
    "GpuSampler",
    "GpuSummary",
    "busy_span",
    "parse_gpu_csv",
    "summarise",
    "under_utilised",
]

SAMPLER_FIELDS = (
    "index",
    "power.draw",
    "power.limit",
    "utilization.gpu",
    "memory.used",
    "memory.total",
)
SAMPLE_MS = 250  # nvidia-smi's sampling period during a level (-lms), in the host's time
_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")  # " [W]" after a header name
_VALUE_UNIT = re.compile(r"^(-?[0-9.]+)\s*(W|%|MiB|MHz|GiB|C)$")
_MISSING = {"", "N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]"}


@dataclass(frozen=True)
class GpuSample:
    """One GPU's reading at one moment (None where nvidia-smi gave no number).

    ``values`` holds every field as printed, units stripped, keyed by the query name.
    """

    index: int | None
    power_draw_w: float | None
    power_limit_w: float | None
    utilization_pct: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    values: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuSummary:
    """Per-GPU power, utilisation and memory over one benchmark level; ``total_power_w`` is the
    power of the ``gpus`` GPUs sampled together (what energy per token divides by)."""

    mean_power_w: float
    max_power_w: float
    power_limit_w: float
    mean_util_pct: float
    max_util_pct: float
    max_memory_used_mib: float
    samples: int
    gpus: int = 1
    total_power_w: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The summary as stored on a trial."""
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _strip_unit(text: str) -> str:
    value = text.strip()
    match = _VALUE_UNIT.match(value)
    return match.group(1) if match else value


def _number(values: Mapping[str, str], name: str) -> float | None:
    text = values.get(name, "")
    if text in _MISSING:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_gpu_csv(
    text: str, fields: Sequence[str] | None = None, *, strict: bool = True
) -> list[GpuSample]:
    """Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` output.

    A header line (``index, power.draw [W], ...``), when present, names the columns (repeated
    headers are skipped); otherwise ``fields`` does. Units (``128.11 W``, ``0 %``, ``143771 MiB``)
    and ``[N/A]`` are handled. With ``strict=False`` a row with the wrong number of columns (the
    last line of a sampler stopped mid-write) is skipped instead.

    Raises:
        ValueError: no header and no ``fields``, or a row with another number of columns.
    """
    names = list(fields) if fields else None
    samples = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if cells and cells[0] in ("index", "timestamp") or (names is None and "[" in line):
            names = [_UNIT.sub("", cell) for cell in cells]
            continue
        if names is None:
            raise ValueError("nvidia-smi CSV without a header line: pass the queried fields")
        if len(cells) != len(names):
            if not strict:
                continue
            raise ValueError(
                f"nvidia-smi CSV row has {len(cells)} columns, expected "
                f"{len(names)}: {line.strip()!r}"
            )
        values = {name: _strip_unit(cell) for name, cell in zip(names, cells)}
        index = _number(values, "index")
        samples.append(
            GpuSample(
                index=int(index) if index is not None else None,
                power_draw_w=_number(values, "power.draw"),
                power_limit_w=_number(values, "power.limit"),
                utilization_pct=_number(values, "utilization.gpu"),
                memory_used_mib=_number(values, "memory.used"),
                memory_total_mib=_number(values, "memory.total"),
                values=values,
            )
        )
    return samples


def summarise(samples: Sequence[GpuSample]) -> GpuSummary | None:
    """Mean and max over all GPUs' samples (per GPU), and the GPUs' power together (the per-GPU
    mean times the GPUs that gave readings: each tick gives one row per GPU); None without power
    readings."""
    power = [s.power_draw_w for s in samples if s.power_draw_w is not None]
    if not power:
        return None
    gpus = len({s.index for s in samples if s.power_draw_w is not None}) or 1
    util = [s.utilization_pct for s in samples if s.utilization_pct is not None]
    limits = [s.power_limit_w for s in samples if s.power_limit_w is not None]
    memory = [s.memory_used_mib for s in samples if s.memory_used_mib is not None]
    return GpuSummary(
        mean_power_w=fmean(power),
        max_power_w=max(power),
        power_limit_w=max(limits) if limits else 0.0,
        mean_util_pct=fmean(util) if util else 0.0,
        max_util_pct=max(util) if util else 0.0,
        max_memory_used_mib=max(memory) if memory else 0.0,
        samples=len(samples),
        gpus=gpus,
        total_power_w=fmean(power) * gpus,
    )


def busy_span(samples: Sequence[GpuSample], *, every_idle_tick: bool = False) -> list[GpuSample]:
    """The samples from the first tick where a GPU was busy (utilisation above 0) to the last:
    the idle ticks before the level's first request and after its last answer are not the
    level's. Idle ticks between busy ones stay, unless ``every_idle_tick`` (an emulated host:
    the client's own pauses, between its warm-up and the level, last K times longer in the
    emulated host's time than they would on the real one, and read as idle cards). With no busy
    tick, or no utilisation read, all stay (none with ``every_idle_tick``: idle cards would
    flatter an emulated level's tokens per joule). A tick is one row per GPU, in order."""
    per_tick = len({s.index for s in samples}) or 1
    if len(samples) % per_tick:
        return list(samples)
    ticks = [samples[i : i + per_tick] for i in range(0, len(samples), per_tick)]
    busy = [
        k for k, tick in enumerate(ticks) if any((s.utilization_pct or 0.0) > 0.0 for s in tick)
    ]
    if not busy:  # an emulated level no tick saw serving has no power of its own to give
        return [] if every_idle_tick else list(samples)
    kept = busy if every_idle_tick else range(busy[0], busy[-1] + 1)
    return [sample for k in kept for sample in ticks[k]]


def under_utilised(summary: GpuSummary | Mapping[str, Any] | None) -> bool:
    """True if the level's mean GPU power stayed under half the power limit.

    The mean, not the peak, decides: a brief spike does not make a level well used. Accepts the
    summary or its :meth:`GpuSummary.to_dict` form; no summary or no known limit gives False.
    """
    if summary is None:
        return False
    data = summary.to_dict() if isinstance(summary, GpuSummary) else summary
    limit = float(data.get("power_limit_w") or 0.0)
    return limit > 0 and float(data.get("mean_power_w") or 0.0) < 0.5 * limit


class GpuSampler:
    """Samples ``nvidia-smi`` on the host while the ``with`` block runs.

    After the block, :attr:`summary` holds the :class:`GpuSummary` (None without nvidia-smi or
    without samples). Errors of the sampler never hide the block's own outcome.

    Args:
        host: the GPU host.
        interval_ms: sampling period passed to ``nvidia-smi -lms``.
        env: environment on the host (a PATH holding the emulator's stand-in nvidia-smi).
        run_dir: folder for the sampler's output (default: a fresh one under the run root).
        gpus: the indices of the GPUs the server uses (``handover.server_gpus``); None: all.
        first_sample_s: how long entering waits for nvidia-smi's first row, so that the level
            starts once the sampler samples (nvidia-smi takes a while to start; an emulated
            level of a fraction of a second was over before it, and read idle cards).
        busy_only: keep only the ticks where a GPU was busy (an emulated host, see
            :func:`busy_span`); otherwise only the idle ticks before and after the level go.
    """

    def __init__(
        self,
        host: Host,
        interval_ms: int = SAMPLE_MS,
        *,
        env: Mapping[str, str] | None = None,
        run_dir: str | None = None,
        gpus: frozenset[int] | None = None,
        first_sample_s: float = 10.0,
        busy_only: bool = False,
    ) -> None:
        self.host = host
        self.first_sample_s = float(first_sample_s)
        self.busy_only = busy_only
        self.gpus = gpus
        self.interval_ms = int(interval_ms)
        self.env = dict(env or {})
        self.run_dir = run_dir or f"{host.run_root.rstrip('/')}/.telemetry/{uuid.uuid4().hex[:12]}"
        self.summary: GpuSummary | None = None
        self.samples: list[GpuSample] = []
        self._handle: ServerHandle | None = None

    def __enter__(self) -> Self:
        try:
            found = self.host.run(
                "command -v nvidia-smi && command -v stdbuf || true", env=self.env, timeout=30.0
            ).stdout.split()
        except HostError:
            return self
        if not found:
            return self
        query = ",".join(SAMPLER_FIELDS)
        argv = [
            "nvidia-smi",
            f"--query-gpu={query}",
            "--format=csv,noheader,nounits",
            "-lms",
            str(self.interval_ms),
        ]
        if len(found) > 1:  # line-buffer the output: a SIGTERM must not lose the last samples
            argv = ["stdbuf", "-oL", *argv]
        try:
            self._handle = self.host.start_server(
                argv, env=self.env, run_dir=self.run_dir, log_name="gpu.csv", port=None
            )
        except CleanUpAbandoned:  # the user gave up on the host: no more calls to it
            raise
        except BaseException:  # Ctrl-C mid-start: ``with`` will not call __exit__; stop it here
            self._handle = self._started_anyway()
            self.__exit__()
            raise
        try:
            self._wait_for_first_sample(self._handle)
        except CleanUpAbandoned:
            raise
        except BaseException:  # Ctrl-C while waiting: ``with`` will not call __exit__
            self.__exit__()
            raise
        return self

    def _wait_for_first_sample(self, handle: ServerHandle) -> None:
        """Return once nvidia-smi wrote a row, has exited, or :attr:`first_sample_s` passed."""
        deadline = time.monotonic() + self.first_sample_s
        while time.monotonic() < deadline:
            try:
                if self.host.read_file(handle.log_path).strip() or not self.host.is_running(
                    handle
                ):
                    return
            except HostError:  # no file yet
                pass
            time.sleep(0.02)

    def _started_anyway(self) -> ServerHandle | None:
        try:
            return self.host.server_in(self.run_dir, wait_s=READ_BACK_S)
        except HostError:
            return None

    def __exit__(self, *exc_info: object) -> None:
        handle, self._handle = self._handle, None
        if handle is None:
            return
        try:
            self.host.stop_server(handle, grace_s=2.0, port=None, wait_gpu_s=0.0, env=self.env)
            text = self.host.read_file(handle.log_path).decode("utf-8", errors="replace")
            self.samples = busy_span(
                [
                    sample
                    for sample in parse_gpu_csv(text, SAMPLER_FIELDS, strict=False)
                    if self.gpus is None or sample.index in self.gpus
                ],
                every_idle_tick=self.busy_only,
            )
            self.summary = summarise(self.samples)
        except (HostError, ValueError):
            self.summary = None
        finally:
            try:
                self.host.run(f"rm -rf -- {shlex.quote(self.run_dir)}", timeout=30.0)
            except HostError:
                pass
