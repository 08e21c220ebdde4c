"""What each trial is measured with (workload), what counts (objective), and the probe.

``workload.emulated`` holds overrides used with ``--emulate`` (a smaller workload and the
emulator's time scale); :meth:`WorkloadSection.resolve` applies them.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from tuner.engines import RequestFormat
from tuner.space._dataset import DatasetConfig
from tuner.space._problems import FieldProblem
from tuner.space._strict import StrictModel, not_blank

__all__ = [
    "RequestsPerLevel",
    "Workload",
    "WorkloadSection",
    "EmulatedWorkload",
    "Objective",
    "Slo",
    "Probe",
    "GoodputSearch",
    "ADDED_DEFAULTS",
]


class RequestsPerLevel(StrictModel):
    """Requests at one level: a fixed ``count``, or ``per_concurrency`` x c (at least ``min``)."""

    count: int | None = Field(default=None, gt=0)
    per_concurrency: float | None = Field(default=None, gt=0)
    min: int = Field(default=1, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _plain_count(cls, data: Any) -> Any:
        return {"count": data} if isinstance(data, int) and not isinstance(data, bool) else data

    @model_validator(mode="after")
    def _one_rule(self) -> RequestsPerLevel:
        if (self.count is None) == (self.per_concurrency is None):
            raise FieldProblem(
                "needs a count or per_concurrency (not both)",
                "write e.g. `requests_per_level: 512` or `{per_concurrency: 2, min: 128}`",
            )
        return self

    def at(self, concurrency: int) -> int:
        """The number of requests at ``concurrency``."""
        if self.count is not None:
            return self.count
        return max(self.min, math.ceil((self.per_concurrency or 0) * concurrency))

    def at_rate(self, rate: float, seconds: float) -> int:
        """The number of requests of an open-loop level: ``count``, else ``rate`` x ``seconds``
        (at least ``min``)."""
        if self.count is not None:
            return self.count
        return max(self.min, math.ceil(rate * seconds))


def _check_levels(levels: list[int] | None) -> list[int] | None:
    if levels is None:
        return None
    if not levels:
        raise FieldProblem("no levels", "list concurrency levels, e.g. [64, 256, 512, 1024]")
    for index, level in enumerate(levels):
        if level < 1:
            raise FieldProblem(
                f"{level} is not a positive concurrency", "use 1 or more", at=(index,)
            )
        if index and level <= levels[index - 1]:
            raise FieldProblem(
                f"{level} is not above the level before it ({levels[index - 1]})",
                "list levels in increasing order, each once",
                at=(index,),
            )
    return levels


class _WorkloadFields(StrictModel):
    """The fields the real workload and the resolved one share.

    ``model`` names the model in OpenAI requests (default: ``server.model_path``, else the first
    of the server's ``GET /v1/models``).
    """

    api: RequestFormat | None = None
    model: (
        Annotated[
            str, not_blank("give the name the server knows the model by, or leave the key out")
        ]
        | None
    ) = None
    levels: list[int] = [64, 256, 512, 1024]
    input_len: int = Field(default=256, gt=0)
    output_len: int = Field(default=256, gt=0)
    requests_per_level: RequestsPerLevel = RequestsPerLevel(per_concurrency=2, min=128)
    warmup: int = Field(default=8, ge=0)
    # The user's traffic (see tuner/space/_dataset.py): a dataset instead of random tokens; and
    # the open-loop levels of `objective.metric: goodput` (arrivals, in-flight cap, length).
    dataset: DatasetConfig | None = None
    arrival: Literal["poisson", "constant"] = "poisson"
    max_concurrency: int = Field(default=1024, gt=0)
    rate_level_s: float = Field(default=60.0, gt=0)

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: list[int]) -> list[int]:
        return _check_levels(value) or []

    def requests_for(self, concurrency: int) -> int:
        """The number of requests sent at ``concurrency``."""
        return self.requests_per_level.at(concurrency)

    def requests_at_rate(self, rate: float) -> int:
        """The number of requests sent at ``rate`` requests/s (``rate_level_s`` of them)."""
        return self.requests_per_level.at_rate(rate, self.rate_level_s)


class Workload(_WorkloadFields):
    """The load of every trial, resolved: the emulated overrides applied when emulating.

    ``time_scale`` is the emulator's K (1 for a real run): the emulator is started with it.
    """

    time_scale: float = Field(default=1.0, gt=0)
    stream_interval: int = Field(default=1, ge=1)


class EmulatedWorkload(StrictModel):
    """Overrides used with ``--emulate``; fields left out keep the real workload's value."""

    levels: list[int] | None = None
    input_len: int | None = Field(default=None, gt=0)
    output_len: int | None = Field(default=None, gt=0)
    requests_per_level: RequestsPerLevel | None = None
    warmup: int | None = Field(default=None, ge=0)
    max_concurrency: int | None = Field(default=None, gt=0)
    rate_level_s: float | None = Field(default=None, gt=0)
    time_scale: float = Field(default=200.0, gt=0)
    # Tokens per streamed event (SGLang's --stream-interval) given to the emulator, so that a
    # large time scale does not flood the client with events (calibration.md).
    stream_interval: int = Field(default=16, ge=1)

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: list[int] | None) -> list[int] | None:
        return _check_levels(value)


class WorkloadSection(_WorkloadFields):
    """The ``workload:`` section as written: the real workload plus its emulated overrides."""

    emulated: EmulatedWorkload = EmulatedWorkload()

    def resolve(self, emulate: bool) -> Workload:
        """The workload of a real run, or of an emulated one (overrides and time scale applied)."""
        fields = dict(self)
        del fields["emulated"]
        if emulate:
            fields.update({k: v for k, v in self.emulated if v is not None})
        return Workload(**fields)


class Slo(StrictModel):
    """Optional service-level limits a level must meet to count (host-time milliseconds)."""

    p99_ttft_ms: float | None = Field(default=None, gt=0)
    median_tpot_ms: float | None = Field(default=None, gt=0)
    p99_tpot_ms: float | None = Field(default=None, gt=0)

    def unmet(self, level: dict[str, Any]) -> str | None:
        """The first limit ``level`` misses (``p99_ttft_ms 812 > 500``), or None."""
        for name in ("p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms"):
            limit, value = getattr(self, name), level.get(name)
            if limit is not None and (value is None or value > limit):
                return f"{name} {'-' if value is None else f'{value:.0f}'} > {limit:g}"
        return None

    @property
    def empty(self) -> bool:
        """True when no limit is set."""
        return all(
            getattr(self, n) is None for n in ("p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms")
        )


class GoodputSearch(StrictModel):
    """How ``metric: goodput`` searches each configuration's highest rate meeting the SLO:
    from ``start_rate``, doubling while it passes (up to ``max_rate``), then halving the gap,
    at most ``max_levels`` levels; it stops when the gap is below ``resolution`` (a fraction)."""

    start_rate: float = Field(default=1.0, gt=0)
    max_rate: float = Field(default=256.0, gt=0)
    max_levels: int = Field(default=6, ge=1, le=20)
    resolution: float = Field(default=0.1, gt=0, lt=1)
    # A level meets the rate only when the client sent at least this fraction of the rate of
    # the arrival schedule it drew (a server that falls behind fills the in-flight cap and slows
    # the sends).
    min_achieved_fraction: float = Field(default=0.9, gt=0, le=1)

    @model_validator(mode="after")
    def _order(self) -> GoodputSearch:
        if self.max_rate < self.start_rate:
            raise FieldProblem(
                f"max_rate {self.max_rate:g} is below start_rate {self.start_rate:g}",
                "raise max_rate",
                at=("max_rate",),
            )
        return self


class Patience(StrictModel):
    """Stop when ``trials`` host-run trials in a row improved the best by less than ``min_improvement``."""

    trials: int = Field(gt=0)
    min_improvement: float = Field(default=0.01, ge=0, lt=1)


class Probe(StrictModel):
    """The correctness probe: greedy prompts whose outputs must match the baseline's."""

    prompts: list[str] = ["The capital of France is", "def fibonacci(n):", "1, 2, 3, 4,"]
    max_tokens: int = Field(default=16, gt=0)
    min_matching_prompts: int = Field(default=2, ge=1)

    @field_validator("prompts")
    @classmethod
    def _prompts(cls, value: list[str]) -> list[str]:
        if not value:
            raise FieldProblem("no prompts", "give at least one prompt")
        for index, prompt in enumerate(value):
            if not prompt.strip():
                raise FieldProblem("empty prompt", "remove it or write a prompt", at=(index,))
        return value

    @model_validator(mode="after")
    def _enough_prompts(self) -> Probe:
        if self.min_matching_prompts > len(self.prompts):
            raise FieldProblem(
                f"{self.min_matching_prompts} is more than the {len(self.prompts)} prompts",
                f"use at most {len(self.prompts)}, or add prompts",
                at=("min_matching_prompts",),
            )
        return self


class Objective(StrictModel):
    """What is maximised, when a level counts as clean, and how eagerly trials are pruned."""

    metric: Literal[
        "output_throughput",
        "total_throughput",
        "request_throughput",
        "goodput",
        "tokens_per_joule",
    ] = "output_throughput"
    max_failed_fraction: float = Field(default=0.01, ge=0, lt=1)
    slo: Slo = Slo()
    prune_margin: float = Field(default=0.10, ge=0, lt=1)
    # Multi-objective mode: also minimise this latency (at the level with the best throughput);
    # the study then has a Pareto front instead of one best trial.
    minimize: Literal["p99_tpot_ms", "median_tpot_ms", "p99_ttft_ms", "median_ttft_ms"] | None = (
        None
    )
    patience: Patience | None = None
    goodput: GoodputSearch = GoodputSearch()
    # The host's run-to-run noise as a share of a figure (0.05: two runs of one configuration
    # differ by about 5%), when known (from `tuner bench` repeats, an earlier study): what a close
    # best and runner-up are judged by until the study has re-measured its own; unset: 2% assumed.
    noise: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _noise_is_a_share(self) -> Objective:
        if self.noise is not None and self.noise >= 0.5:
            raise FieldProblem(
                f"{self.noise:g} is a share of a figure, not a percent",
                f"write {self.noise / 100:g} for {self.noise:g}%"
                if self.noise < 50
                else "use a share below 0.5 (0.05: 5%)",
                at=("noise",),
            )
        return self

    @model_validator(mode="after")
    def _goodput_needs_an_slo(self) -> Objective:
        if self.metric == "goodput" and self.slo.empty:
            raise FieldProblem(
                "goodput needs an SLO",
                "set objective.slo.p99_ttft_ms, median_tpot_ms or p99_tpot_ms",
                at=("slo",),
            )
        if self.metric == "goodput" and self.minimize:
            raise FieldProblem(
                "goodput is single-objective", "remove objective.minimize", at=("minimize",)
            )
        return self


# Fields added after studies were created: left out of the fingerprint while at their default, so
# that a study made before them still resumes.
ADDED_DEFAULTS: dict[str, dict[str, Any]] = {
    "workload": {
        "dataset": None,
        "arrival": "poisson",
        "max_concurrency": 1024,
        "rate_level_s": 60.0,
        "model": None,
    },
    "workload.emulated": {"max_concurrency": None, "rate_level_s": None},
    "objective": {"goodput": GoodputSearch().model_dump(), "noise": None},
    "objective.slo": {"p99_tpot_ms": None},
}
