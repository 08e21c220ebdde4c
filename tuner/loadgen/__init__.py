"""The streaming load generator: closed-loop levels against SGLang or OpenAI-compatible servers.

``run_level(base_url, LevelSpec(...))`` measures one level and returns :class:`LevelMetrics` on
the host's time scale; :func:`run_levels` runs several synchronously. A :class:`Dialect` given
as ``api`` names the model and the OpenAI extensions a server takes (none: a strict server).
:func:`complete` asks for one greedy completion (the correctness probe's tool). Requests come
from fixed-length random tokens or a request source (:mod:`tuner.loadgen._datasets`: dataset
files, random lengths, shared prefixes); a level is a concurrency (closed loop) or a request rate
(open loop). ``tuner.loadgen.bench_serving`` runs SGLang's own benchmark instead and reads its
output into the same metrics.
"""

from __future__ import annotations

from tuner.loadgen._aggregate import percentile_name
from tuner.loadgen._apis import Dialect
from tuner.loadgen._capacity import ClientCapacity, client_capacity, measure_client
from tuner.loadgen._datasets import (
    FilePool,
    RandomLengths,
    RequestSource,
    SharedPrefix,
    load_file_pool,
)
from tuner.loadgen._level import run_level, run_levels
from tuner.loadgen._metrics import LevelMetrics
from tuner.loadgen._open_loop import ARRIVALS
from tuner.loadgen._prompts import PROMPT_TOKEN_RANGE, ids_to_words, load_sharegpt, make_prompts
from tuner.loadgen._server import (
    ServerAnswered,
    auth_headers,
    complete,
    complete_async,
    complete_many,
    fetch_emulated_startup_s,
    fetch_model_name,
    fetch_time_scale,
    fetch_time_scale_async,
)
from tuner.loadgen._spec import APIS, LevelSpec

__all__ = [
    "ServerAnswered",
    "ClientCapacity",
    "client_capacity",
    "measure_client",
    "APIS",
    "ARRIVALS",
    "Dialect",
    "FilePool",
    "RandomLengths",
    "RequestSource",
    "SharedPrefix",
    "load_file_pool",
    "PROMPT_TOKEN_RANGE",
    "ids_to_words",
    "LevelMetrics",
    "LevelSpec",
    "auth_headers",
    "complete",
    "complete_async",
    "complete_many",
    "fetch_model_name",
    "fetch_emulated_startup_s",
    "fetch_time_scale",
    "fetch_time_scale_async",
    "load_sharegpt",
    "make_prompts",
    "percentile_name",
    "run_level",
    "run_levels",
]
