"""The :class:`EngineProfile` model and the loader of the profiles shipped beside it."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tuner.errors import ConfigError
from tuner.failures import FailureClass

__all__ = [
    "CapacityFlag",
    "CrashSignature",
    "EngineProfile",
    "REQUEST_EXTENSIONS",
    "RequestExtension",
    "RequestFormat",
    "REQUEST_FORMATS",
    "SIGNATURE_REASONS",
    "TuningRule",
    "load_profile",
    "profile_names",
]

_PROFILE_DIR = Path(__file__).parent

# The short names a profile's crash signature gives its failure class by.
SIGNATURE_REASONS = {
    "crash": FailureClass.STARTUP_CRASH,
    "oom": FailureClass.OOM_AT_START,
    "hang": FailureClass.HANG,
    "host": FailureClass.HOST_ERROR,
}


# The request formats the client speaks, by the name an engine profile or a workload gives as
# ``api``: SGLang's native ``/generate``, OpenAI completions, OpenAI chat completions.
RequestFormat = Literal["sglang", "openai", "openai-chat"]
REQUEST_FORMATS: tuple[str, ...] = get_args(RequestFormat)


class CrashSignature(BaseModel):
    """A log line that means the server is broken, and the failure class it maps to.

    ``reason`` is the :class:`FailureClass` the line means before the server is ready; under load
    a crash or an out-of-memory line becomes ``unstable-at-<c>``. The profiles write it short:
    ``crash`` (``startup-crash``), ``oom`` (``oom-at-start``), ``hang``, ``host`` (a problem of
    the machine, not of the configuration: ``address already in use``, a ``host-error``); a
    failure class's stored name is read too.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    pattern: str
    reason: FailureClass = FailureClass.STARTUP_CRASH
    fatal: bool = True

    @field_validator("reason", mode="before")
    @classmethod
    def _short_name(cls, value: Any) -> Any:
        return SIGNATURE_REASONS.get(value, value) if isinstance(value, str) else value

    @field_validator("reason")
    @classmethod
    def _known_before_ready(cls, value: FailureClass) -> FailureClass:
        if value not in SIGNATURE_REASONS.values():
            raise ValueError(
                f"a crash signature means one of {', '.join(SIGNATURE_REASONS)}, not {value}"
            )
        return value

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        re.compile(value)
        return value


class TuningRule(BaseModel):
    """What a person tuning by hand reads in the server log, and the flag they change.

    The rule fires on a trial when ``observations[observed] >= at_least`` (and every
    ``also_at_least`` holds); the ``guided`` strategy then proposes that trial's configuration
    with the parameter whose flag is ``change`` moved one step in ``direction``. ``says`` is the
    one-line reason, formatted with the observations and ``{value}`` (the current value).
    ``lower_to_at_most`` names an observation a lowered value must not exceed (a cap lowered
    to get decode back under the captured CUDA graphs is no use above ``graph_max_bs``); when
    the trial did not report it, the step is proposed without that bound.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    observed: str
    at_least: float | None = None
    at_most: float | None = None  # fires when the observation is at most this (a low reading)
    also_at_least: dict[str, float] = {}
    change: str
    direction: Literal["raise", "lower", "off"]  # off: the parameter unset (the engine's default)
    says: str
    lower_to_at_most: str | None = None

    @model_validator(mode="after")
    def _lowers(self) -> "TuningRule":
        if (self.at_least is None) == (self.at_most is None):
            raise ValueError("give one of at_least or at_most")
        if self.lower_to_at_most is not None and self.direction != "lower":
            raise ValueError("lower_to_at_most applies to a rule whose direction is lower")
        return self

    def allows(self, value: Any, observations: dict[str, float]) -> bool:
        """Whether ``value`` is a step this rule may propose, given one trial's observations."""
        bound = observations.get(self.lower_to_at_most) if self.lower_to_at_most else None
        return bound is None or value is None or value <= bound

    def fires(self, observations: dict[str, float]) -> bool:
        """Whether the observations of one trial meet this rule's conditions."""
        if (
            self.at_most is not None
            and not observations.get(self.observed, float("inf")) <= self.at_most
        ):
            return False
        checks = {
            **({self.observed: self.at_least} if self.at_least is not None else {}),
            **self.also_at_least,
        }
        return all(
            observations.get(name, float("-inf")) >= bound for name, bound in checks.items()
        )


class CapacityFlag(BaseModel):
    """A flag that bounds the batch the server runs, and what changing it is expected to pay.

    ``kind``: ``cap`` (requests running at once), ``memory`` (the share of GPU memory for the KV
    pool), ``batch`` (tokens or sequences a step takes), ``admission`` (how much of the pool
    the scheduler reserves before it admits a request) or ``pool`` (a layout that holds more
    requests in the same memory: expected to pay where the log says the pool is full, no prior
    where it says nothing of the pool);
    ``effect``: the prior gain (0-1) of
    changing it while it binds. The ``guided`` strategy's sweep tries the parameters by expected
    effect when no signal fired, so these come before flags of a few percent.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["cap", "memory", "batch", "admission", "pool"]
    effect: float = Field(gt=0.0, le=1.0)


# What SGLang's and vLLM's OpenAI-compatible servers take beyond the OpenAI API, and the client
# sends when the profile lists it: ``ignore_eos`` (every reply runs to ``max_tokens``), token-id
# prompts (``"prompt": [17, 42, ...]``: exact prompt lengths) and
# ``stream_options.continuous_usage_stats`` (a token count on every streamed event).
RequestExtension = Literal["ignore_eos", "token_ids", "continuous_usage_stats"]
REQUEST_EXTENSIONS: tuple[RequestExtension, ...] = (
    "ignore_eos",
    "token_ids",
    "continuous_usage_stats",
)

# The parallel dimensions a profile names a flag for (``parallel_flags``).
ParallelKind = Literal["tp", "pp", "dp", "dp_attention"]


class EngineProfile(BaseModel):
    """Everything the tuner needs to know about one inference engine."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    package: str
    command: str
    module: str
    version_code: str
    help_args: list[str] = ["--help"]
    health_path: str = "/health"
    ready_log_pattern: str
    server_info_path: str | None = None
    api: RequestFormat = "sglang"
    models_path: str = "/v1/models"
    # The OpenAI API's extensions this server accepts (REQUEST_EXTENSIONS); a strict server
    # (``transformers serve``: 422 on an unknown field, 400 on a token-id prompt) lists none,
    # and then gets text prompts, no ignore_eos, and usage on its last event only.
    request_extensions: list[RequestExtension] = list(REQUEST_EXTENSIONS)
    # The flag that names the model to serve when ``server.model_path`` is given (SGLang:
    # ``--model-path``); None: the model is the first argument after the command
    # (``transformers serve MODEL``).
    model_flag: str | None = None
    crash_signatures: list[CrashSignature]
    port_flag: str = "--port"
    host_flag: str = "--host"
    bench_module: str | None = None
    tuning_rules: list[TuningRule] = []
    # The flags of the parallel layout, for a space's ``fit:`` check: tp, pp, dp (numbers) and
    # dp_attention (a switch that keeps DP inside the TP group). Empty: ``fit:`` is refused.
    parallel_flags: dict[ParallelKind, str] = {}
    # Flags a person changes for a reason, not to see what happens: the ``guided`` strategy's
    # one-change sweep tries them after every other parameter unless the best's KV pool is full
    # (SGLang: turning CUDA graphs off, or capturing fewer batches, trades speed for memory).
    sweep_late: list[str] = []
    # Flags whose gain lies at another load or on another host (SGLang: speculative decoding pays
    # at low concurrency and costs at high; an all-to-all MoE backend needs NVLink or RDMA): the
    # sweep tries them after every other parameter, the memory trades included.
    sweep_last: list[str] = []
    # Flags that bound the batch (CapacityFlag): flag -> its kind and prior effect; the ``guided``
    # sweep orders parameters by expected effect, these first while their limit may bind.
    capacity: dict[str, CapacityFlag] = {}
    # The flag that reads more flags from a YAML file (SGLang and vLLM: ``--config``): flags that
    # carry secrets reach the server there, in a 0600 file, never on its command line.
    config_flag: str | None = "--config"
    # Flags whose value is a secret (SGLang: ``--api-key``, ``--admin-api-key``): kept off the
    # command line, stored as ``***``; a flag whose value is written ``${NAME}`` is one too.
    secret_flags: list[str] = []
    # The flag whose value the server requires from clients as ``Authorization: Bearer KEY``
    # (one of ``secret_flags``): the probe and the load generator send it.
    api_key_flag: str | None = None
    # Numbers the server log reports, for strategies: series name -> regex whose first group is
    # the number (see tuner/signals/_series.py for the names read); empty: nothing observed.
    log_observations: dict[str, str] = {}
    # The same series from the server's Prometheus endpoint at ``metrics_path``, sampled by the
    # client during each level: series name -> metric (``name`` or ``name{label="value"}``, as
    # the engine exposes it); preferred over the log's when both give one (tuner/signals).
    metrics_path: str = "/metrics"
    metrics_observations: dict[str, str] = {}
    # The flag that caps the requests running at once (its value bounds ``#running-req``).
    running_cap_flag: str | None = None
    # Flags whose value must be at least the running batch for it to run at full speed (SGLang's
    # ``--cuda-graph-max-bs``: a batch above the captured graphs runs without them). A ``guided``
    # move that raises the running cap raises these with it, up to the batch the levels reach:
    # the log need not say so, the configuration does.
    cap_covered_by: list[str] = []
    # flag -> the observation (a ``log_observations`` name) that reports the value the server
    # used for it when it is unset (SGLang's ``--cuda-graph-max-bs``: the largest captured batch).
    # Setting the flag to that value changes nothing, and the ``guided`` strategy does not run it.
    value_in_use: dict[str, str] = {}

    @field_validator("api_key_flag")
    @classmethod
    def _api_key_is_secret(cls, value: str | None, info: Any) -> str | None:
        if value is not None and value not in info.data.get("secret_flags", []):
            raise ValueError(f"api_key_flag: {value} is not in secret_flags; add it there")
        return value

    @field_validator("log_observations")
    @classmethod
    def _observations_compile(cls, value: dict[str, str]) -> dict[str, str]:
        for pattern in value.values():
            if re.compile(pattern).groups < 1:
                raise ValueError(
                    f"log_observations pattern {pattern!r} needs one (group) for the number"
                )
        return value

    @field_validator("metrics_observations")
    @classmethod
    def _metrics_parse(cls, value: dict[str, str]) -> dict[str, str]:
        from tuner.signals._metrics import MetricSelector
        from tuner.signals._series import SERIES_NAMES

        for name, text in value.items():
            if name not in SERIES_NAMES:
                raise ValueError(
                    f"metrics_observations: {name!r} is no series the tuner reads; "
                    f"use one of: {', '.join(SERIES_NAMES)}"
                )
            try:
                MetricSelector.parse(text)
            except ValueError as error:
                raise ValueError(f"metrics_observations: {name}: {error}") from None
        return value

    @field_validator("value_in_use")
    @classmethod
    def _in_use_observed(cls, value: dict[str, str], info: Any) -> dict[str, str]:
        observed = info.data.get("log_observations", {})
        for flag, name in value.items():
            if name not in observed:
                raise ValueError(
                    f"value_in_use: {flag}: {name!r} is not a log_observations name "
                    f"(one of: {', '.join(sorted(observed)) or 'none'}); add its pattern there"
                )
        return value

    def running_cap(self, argv: list[str]) -> int | None:
        """The running-request cap given on a command line, or None (the engine's default)."""
        if self.running_cap_flag is None or self.running_cap_flag not in argv:
            return None
        index = argv.index(self.running_cap_flag)
        try:
            return int(argv[index + 1])
        except (IndexError, ValueError):
            return None

    def classify(self, line: str) -> CrashSignature | None:
        """The first crash signature this log line matches, or None."""
        for signature in self.crash_signatures:
            if re.search(signature.pattern, line):
                return signature
        return None


def profile_names() -> list[str]:
    """The names of the shipped profiles (``sglang``, ``vllm``, ...)."""
    return sorted(p.stem for p in _PROFILE_DIR.glob("*.yaml"))


@cache
def load_profile(name: str) -> EngineProfile:
    """Load the shipped profile ``name``; unknown names are a :class:`ConfigError`."""
    path = _PROFILE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"engine {name!r} is unknown: use one of {', '.join(profile_names())}")
    try:
        return EngineProfile.model_validate(yaml.safe_load(path.read_text()))
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise ConfigError(
            f"{path}: {field}: {first['msg']}; fix that entry of the profile"
        ) from None
