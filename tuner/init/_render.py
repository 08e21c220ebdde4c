"""Write the search space as YAML text a person can read: every parameter on one line with a
comment saying why it is there and where its range came from, and a header that says what was
read from the host and what was assumed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from tuner.init._command import LaunchCommand
from tuner.init._host import HostFacts
from tuner.init._plan import INACTIVE, Plan
from tuner.space import is_secret_name

__all__ = ["DEFAULT_PORTS", "SpaceText", "Workload", "render_space"]

DEFAULT_PORTS = {"sglang": 30000, "vllm": 8000, "transformers": 8000}
_PROBE = '["The capital of France is", "def fibonacci(n):", "1, 2, 3, 4,"]'


@dataclass(frozen=True)
class Workload:
    """The load each configuration is measured at."""

    levels: list[int]
    levels_why: str
    input_len: int
    output_len: int
    dataset: str | None


@dataclass(frozen=True)
class SpaceText:
    """Everything the file says, besides the plan."""

    name: str
    command: LaunchCommand
    facts: HostFacts
    plan: Plan
    workload: Workload
    host: dict[str, Any] | str
    emulated: bool
    original: str  # the command as the user gave it, for the header
    port: int  # the command's --port, else the engine's default (or a free one near it)
    secret_flags: tuple[str, ...] = ()  # the engine profile's (their values are never written)


def _flow(value: Any) -> str:
    """``value`` as one line of YAML (flow style)."""
    text = yaml.safe_dump(
        value, default_flow_style=True, sort_keys=False, width=10**6, allow_unicode=True
    )
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _comment_block(lines: list[str], indent: str = "") -> list[str]:
    return [f"{indent}# {line}".rstrip() for line in lines]


def _literal(key: str, text: str, indent: int) -> list[str]:
    """``key: |2`` and ``text`` as a literal block whose lines keep their own leading spaces."""
    pad = " " * (indent + 2)
    return [
        f"{' ' * indent}{key}: |2",
        *(pad + line for line in text.removesuffix("\n").split("\n")),
    ]


# On a CPU host that is also the tuner's machine, the server and the load generator share the
# cores: the server runs at a lower priority, its session too (with the kernel's autogroups CPU
# time is shared between sessions first, so `nice` alone still starved the client's event loop:
# search_spaces/vllm-cpu-tiny.yaml measured it), or every level reads measurement-bound.
_NICED = 'sh -c \'{ echo 10 > /proc/self/autogroup; } 2>/dev/null; exec nice -n 10 "$0" "$@"\''


def _command_text(command: LaunchCommand, niced: bool) -> str:
    import shlex

    words = list(command.recognised.program)
    if command.model is not None and command.model_flag is None and command.engine == "vllm":
        words.append(command.model)  # `vllm serve MODEL`: kept where the user gave it
    return f"{_NICED} {shlex.join(words)}" if niced else shlex.join(words)


def _flag_value(value: str | tuple[str, ...] | None) -> Any:
    def scalar(text: str) -> Any:
        loaded = yaml.safe_load(text) if text and text.strip() == text else text
        return (
            loaded if isinstance(loaded, (int, float)) and not isinstance(loaded, bool) else text
        )

    if value is None:
        return True
    if isinstance(value, tuple):
        return [scalar(v) for v in value]
    return scalar(value)


def _header(s: SpaceText) -> list[str]:
    facts, model = s.facts, s.facts.model
    memory = f"{facts.gpu_memory_gb:g} GiB" if facts.gpu_memory_gb else "memory unknown"
    capability = f"{facts.compute_cap:g}" if facts.compute_cap else "unknown"
    gpus = (
        f"{facts.gpu_count} x {facts.gpus[0].name} ({memory}, compute capability {capability})"
        if facts.gpus
        else "no GPUs (nvidia-smi not found or unreadable)"
    )
    lines = [
        f"Written by `tuner init` from the command you run today{' (on the EMULATED GLM-5 host)' if s.emulated else ''}:",
        f"  {s.original}",
        "",
        f"Read from {facts.where}:",
        (
            f"  engine: {s.command.engine} {facts.engine_version or '(version not read)'} "
            f"({len(facts.flags.flags)} flags in its --help), Python {facts.python}"
        ),
        f"  GPUs: {gpus}",
        f"  model: {model.describe() if model else '(config.json not read)'}",
    ]
    if facts.notes:
        lines += ["", "Could not read (and what was assumed instead):"]
        lines += [f"  - {note.line()}" for note in facts.notes]
    flags = " ".join(sorted(s.plan.searched_flags())) or "(none)"
    lines += [
        "",
        f"Searched: {flags}",
        "Not searched:",
        *(f"  - {why}" for why in s.plan.left_out),
        "",
        "The baseline below is your command: the study measures it first and compares every",
        "configuration with it. Format: docs/search-space.md.",
        "",
        f"  tuner optimize {s.name}.yaml --dry-run{' --emulate' if s.emulated else ''}   # what would run",
        f"  tuner optimize {s.name}.yaml --trials 40{' --emulate' if s.emulated else ''}",
        f"  tuner export {s.name}.yaml --out launch.sh{' --emulate' if s.emulated else ''}",
    ]
    return _comment_block(lines)


def _server(s: SpaceText) -> list[str]:
    cmd = s.command
    # by what every spelling shares (the command's `-tp` is a searched `--tensor-parallel-size`)
    searched = {cmd.key(flag) for flag in s.plan.searched_flags()}
    server_own = {cmd.key("--host"), cmd.key("--port")}
    # a searched switch's other half (`--no-compile` beside a searched `--compile`) is the search's too
    flags = [
        f
        for f in cmd.flags
        if cmd.key(f.name) not in searched
        and cmd.key(f.name.replace("--no-", "--", 1)) not in searched
        and cmd.key(f.name) not in server_own
    ]
    port = cmd.value("--port")
    niced = (
        not s.facts.gpus
        and not s.emulated
        and (s.host == "local" or (isinstance(s.host, dict) and s.host.get("address") == "local"))
    )
    lines = ["server:"]
    if niced:
        lines += _comment_block(
            [
                "A CPU host shared with the load generator: the server runs niced (and its session), so",
                "the client keeps up and the levels measure the server; your command is otherwise unchanged.",
            ],
            "  ",
        )
    lines.append(f"  command: {_flow(_command_text(cmd, niced))}   # your command's program")
    if cmd.model is not None and not (cmd.engine == "vllm" and cmd.model_flag is None):
        lines.append(
            f"  model_path: {_flow(cmd.model)}   # the model your command serves (kept fixed)"
        )
    bind = cmd.value("--host")
    if isinstance(bind, str):
        lines.append(f"  bind: {_flow(bind)}   # your command's --host")
    source = (
        "your command's --port"
        if isinstance(port, str)
        else (
            "the engine's default"
            if s.port == DEFAULT_PORTS[cmd.engine]
            else "free on the host (the default was in use)"
        )
    )
    lines.append(f"  port: {s.port}   # {source}")
    if flags:
        lines.append(
            "  flags:                          # your command's other flags: the same in every configuration"
        )
        for f in flags:
            if f.name in s.secret_flags and f.value is not None:
                variable = f"{cmd.engine}_{f.name.strip('-')}".upper().replace("-", "_")
                lines.append(
                    f"    {f.name}: ${{{variable}}}   # a secret: export {variable}=... "
                    "(your command's value is not written here)"
                )
            else:
                lines.append(f"    {f.name}: {_flow(_flag_value(f.value))}")
    env = cmd.recognised.env
    if env:
        lines.append("  env:                            # the environment your command sets")
        for name, value in env.items():
            if is_secret_name(name):  # HF_TOKEN=...: read from tuner's environment, never written
                lines.append(
                    f"    {name}: ${{{name}}}   # a secret: export {name}=... before tuner optimize"
                )
            else:
                lines.append(f"    {name}: {_flow(value)}")
    return lines


def _timeouts(s: SpaceText) -> list[str]:
    if s.facts.gpus:
        values, why = (
            (600, 900, 900, 30, 120),
            "a large model on GPUs: minutes to load and capture graphs",
        )
    else:
        values, why = (
            (120, 300, 300, 20, 60),
            "a CPU host: start-up in tens of seconds, slow levels",
        )
    names = ("start_s", "ready_s", "level_s", "stop_grace_s", "probe_s")
    return [
        f"timeouts:                         # host seconds per phase; {why}",
        *(f"  {n}: {v}" for n, v in zip(names, values)),
    ]


def _parameters(s: SpaceText) -> list[str]:
    lines = [
        "parameters:                       # what the study searches, in order; a when: condition reads only earlier ones"
    ]
    for param in s.plan.params:
        lines.append(f"  {param.name}: {_flow(param.spec)}")
        lines.append(f"    # {param.why}")
    return lines


def _patches(s: SpaceText) -> list[str]:
    if not s.plan.patches:
        return []
    lines = [
        "patches:                          # source patches whose text is in the installed files"
    ]
    for name, patch in s.plan.patches.items():
        lines.append(f"  {name}:")
        for key in ("package", "file", "description"):
            lines.append(f"    {key}: {_flow(patch[key])}")
        lines += _literal("find", patch["find"], 4)
        lines += _literal("replace", patch["replace"], 4)
    return lines


def _constraints(s: SpaceText) -> list[str]:
    if not s.plan.constraints:
        return []
    lines = [
        "constraints:                      # checked before a trial runs; the baseline is exempt"
    ]
    for c in s.plan.constraints:
        lines.append(f"  - {_flow({'when': c.when, 'action': c.action, 'reason': c.reason})}")
    return lines


def _fit(s: SpaceText) -> list[str]:
    if not s.plan.fit:
        return []
    return [
        f"fit: {_flow(s.plan.fit)}",
        f"  # {s.plan.fit_why}; a layout that cannot hold the weights is PRUNED before host time",
    ]


def _baseline(s: SpaceText) -> list[str]:
    lines = [
        "baseline:                         # your command: the value it gives each parameter (null: left to the engine)"
    ]
    for param in s.plan.params:
        if param.baseline is not INACTIVE:
            lines.append(f"  {param.name}: {_flow(param.baseline)}")
    return lines


def _workload(s: SpaceText) -> list[str]:
    w = s.workload
    top = max(w.levels)
    lines = [
        "workload:",
        f"  levels: {_flow(w.levels)}   # {w.levels_why}",
        f"  input_len: {w.input_len}",
        f"  output_len: {w.output_len}",
        "  requests_per_level: {per_concurrency: 2, min: 64}   # two waves of each level's streams",
        "  warmup: 8                       # unmeasured requests before the first level",
    ]
    if w.dataset:
        lines.append(f"  dataset: {_flow(w.dataset)}   # your traffic (--dataset)")
    if s.command.engine == "vllm" and s.command.model_flag is None and s.command.model:
        lines.append(f"  model: {_flow(s.command.model)}   # the model's name in requests")
    if s.emulated:
        lines += [
            "  emulated:                       # with --emulate: a short study on 2 CPU cores",
            "    requests_per_level: {per_concurrency: 1, min: 128}",
            "    time_scale: 400               # the emulator runs 400x faster than the host",
            "    stream_interval: 256          # tokens per streamed event",
        ]
    del top
    return lines


def render_space(s: SpaceText) -> str:
    """The whole file."""
    host = s.host if isinstance(s.host, str) else _flow(s.host)
    lines = [
        *_header(s),
        "",
        f"name: {s.name}",
        f"engine: {s.command.engine}                    # tuner/engines/{s.command.engine}.yaml",
    ]
    if s.facts.engine_version:
        lines.append(
            f'engine_version: "{s.facts.engine_version}"           # read from the host; `tuner doctor` compares it'
        )
    if s.facts.model:
        lines.append(f"model: {_flow(s.facts.model.path.rstrip('/').rsplit('/', 1)[-1])}")
    lines.append(
        f"host: {host}"
        + ("   # ignored with --emulate: the emulated host is this machine" if s.emulated else "")
    )
    sections = [
        _server(s),
        _timeouts(s),
        _patches(s),
        _parameters(s),
        _constraints(s),
        _fit(s),
        _baseline(s),
        _workload(s),
        [
            "objective:",
            "  metric: output_throughput       # output tokens/s at the best clean level",
            "  max_failed_fraction: 0.01",
            "  prune_margin: 0.10              # stop a configuration 10% below the baseline at every level so far",
        ],
        [
            "probe:                            # greedy outputs that must match the baseline's",
            f"  prompts: {_PROBE}",
            "  max_tokens: 16",
            "  min_matching_prompts: 2",
        ],
    ]
    for section in sections:
        if section:
            lines += ["", *section]
    return "\n".join(lines) + "\n"
