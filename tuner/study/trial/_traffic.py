"""The study's traffic, made once before any host time: the request source of ``workload.dataset``
(a dataset file is read here, streamed, so a bad file is a one-line error naming its line before
the host is touched), the load level of a concurrency or of a request rate, and the dialect the
client speaks to the server (its API, the model's name, the extensions the engine takes)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from tuner.engines import RequestFormat
from tuner.loadgen import (
    Dialect,
    LevelSpec,
    RandomLengths,
    RequestSource,
    SharedPrefix,
    load_file_pool,
)

if TYPE_CHECKING:
    from tuner.space import Workload
    from tuner.space import SearchSpace

__all__ = ["dataset_path", "rate_level", "request_dialect", "request_source"]


def request_dialect(space: SearchSpace, api: str) -> Dialect:
    """How the client speaks to the space's server: ``api``, the model's name
    (``workload.model``, else ``server.model_path``; None: asked of ``/v1/models``) and the
    OpenAI extensions its engine profile lists (``request_extensions``: none for a strict
    server such as ``transformers serve``)."""
    return Dialect(
        cast(RequestFormat, api),
        space.served_model_name(),
        frozenset(space.profile.request_extensions),
    )


def dataset_path(path: str, space_path: Path) -> Path:
    """A dataset path as written: absolute, else beside the search-space file when a file is
    there, else relative to the current folder."""
    given = Path(path).expanduser()
    if given.is_absolute():
        return given
    beside = space_path.parent / given
    return beside if beside.exists() else given


def request_source(workload: Workload, space_path: Path) -> RequestSource | None:
    """The request source of ``workload.dataset`` (None: fixed-length random tokens)."""
    config = workload.dataset
    if config is None:
        return None
    if config.kind == "random":
        return RandomLengths(workload.input_len, workload.output_len, config.range_ratio)
    if config.kind == "shared_prefix":
        return SharedPrefix(
            config.groups,
            config.prefix_len,
            config.suffix_len or workload.input_len,
            workload.output_len,
        )
    assert config.path is not None  # a file dataset names its file (validated with the space)
    return load_file_pool(
        dataset_path(config.path, space_path),
        sample=config.sample,
        default_output_len=workload.output_len,
        max_output_len=config.max_output_len,
        output_len=config.output_len,
    )


def rate_level(
    workload: Workload,
    rate: float,
    time_limit_s: float,
    seed: int,
    source: RequestSource | None,
    first_request: int = 0,
) -> LevelSpec:
    """An open-loop level at ``rate`` requests per host second (``workload.arrival`` times,
    at most ``workload.max_concurrency`` in flight), starting at ``first_request`` in the
    trial's request stream (the requests of the trial's earlier levels)."""
    return LevelSpec(
        concurrency=workload.max_concurrency,
        num_requests=workload.requests_at_rate(rate),
        input_len=workload.input_len,
        output_len=workload.output_len,
        time_limit_s=time_limit_s,
        request_rate=rate,
        arrival=workload.arrival,
        warmup=workload.warmup,
        seed=seed,
        dataset=source,
        first_request=first_request,
    )
