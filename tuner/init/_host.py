"""What the host says about the engine, the GPUs and the model, read the way ``tuner doctor``
reads it: over SSH, locally, or on the emulated GLM-5 host.

Every reading that fails becomes a :class:`Note` (what could not be read, and what is assumed
instead) rather than an error: ``tuner init`` still writes a space, saying so in the file and on
the terminal. Only an engine whose ``--help`` cannot be run stops it (exit 1): without its flag
list nothing can be checked.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tuner.engines import EngineProfile
from tuner.errors import TunerError
from tuner.host import Host
from tuner.init._command import Recognised
from tuner.init._help import EngineFlags, parse_help
from tuner.patches import PatchManager, PatchSpec
from tuner.telemetry import parse_gpu_csv

__all__ = ["Gpu", "HostFacts", "ModelFacts", "Note", "assumed_host", "read_host"]

_GPU_QUERY = "--query-gpu=index,name,memory.total,compute_cap --format=csv,noheader,nounits"
# Run with the host's Python: the model's config.json (the path, else the Hugging Face cache of a
# hub id) and the weights' size (the index's total_size, else the weight files' sizes).
_MODEL_SCRIPT = r"""
import glob, json, os, sys
p = sys.argv[1]
dirs = [p]
if not os.path.isdir(p):
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub")
    dirs += sorted(glob.glob(os.path.join(hub, "models--" + p.replace("/", "--"), "snapshots", "*")))
for d in dirs:
    c = os.path.join(d, "config.json")
    if os.path.isfile(c):
        size = None
        index = os.path.join(d, "model.safetensors.index.json")
        if os.path.isfile(index):
            size = json.load(open(index)).get("metadata", {}).get("total_size")
        if not size:
            size = sum(os.path.getsize(f) for pattern in ("*.safetensors", "*.bin", "*.pt", "*.gguf")
                       for f in glob.glob(os.path.join(d, pattern)))
        print(json.dumps({"dir": d, "config": json.load(open(c)), "weights_bytes": size or None}))
        break
else:
    print("null")
"""


@dataclass(frozen=True)
class Note:
    """Something ``init`` could not read, and what it assumed instead."""

    what: str
    assumed: str

    def line(self) -> str:
        return f"{self.what}; assumed: {self.assumed}"


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_mib: float
    compute_cap: float | None


@dataclass(frozen=True)
class ModelFacts:
    """What the model's ``config.json`` says (and the weights' size on disk)."""

    path: str
    architecture: str
    experts: int | None  # routed experts; None: a dense model
    nextn_layers: int  # MTP / NEXTN draft layers shipped with the model
    layers: int | None
    attention_heads: int | None
    mla: bool  # multi-head latent attention (kv_lora_rank): DeepSeek-style, DP attention applies
    max_positions: int | None
    weights_gb: float | None

    @property
    def moe(self) -> bool:
        return bool(self.experts)

    @classmethod
    def from_config(cls, path: str, config: dict, weights_bytes: int | None) -> ModelFacts:
        merged = {**config, **(config.get("text_config") or {})}

        def first(*keys: str) -> int | None:
            for key in keys:
                if isinstance(merged.get(key), int) and merged[key] > 0:
                    return int(merged[key])
            return None

        return cls(
            path=path,
            architecture=(merged.get("architectures") or [merged.get("model_type", "?")])[0],
            experts=first(
                "n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts"
            ),
            nextn_layers=first(
                "num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers"
            )
            or 0,
            layers=first("num_hidden_layers", "n_layers"),
            attention_heads=first("num_attention_heads", "n_heads"),
            mla=bool(merged.get("kv_lora_rank")),
            max_positions=first("max_position_embeddings"),
            weights_gb=round(weights_bytes / 2**30, 3) if weights_bytes else None,
        )

    def describe(self) -> str:
        kind = f"MoE, {self.experts} experts" if self.moe else "dense"
        size = f"{self.weights_gb:.4g} GB" if self.weights_gb is not None else "size unknown"
        extra = f", {self.nextn_layers} NEXTN/MTP layer(s)" if self.nextn_layers else ""
        return f"{self.architecture}: {kind}, {self.layers} layers, {self.attention_heads} heads, {size}{extra}"


@dataclass
class HostFacts:
    """The host as ``init`` read it."""

    where: str  # "local", "root@gpu-host", "the emulated GLM-5 host"
    python: str
    engine_version: str | None
    flags: EngineFlags
    gpus: list[Gpu] | None  # None: no nvidia-smi (a CPU host, or it could not be read)
    model: ModelFacts | None
    patches: dict[str, str] = field(
        default_factory=dict
    )  # patch -> clean | applied | mismatch | absent
    notes: list[Note] = field(default_factory=list)

    @property
    def gpu_count(self) -> int:
        return len(self.gpus or [])

    @property
    def gpu_memory_gb(self) -> float | None:
        # GiB, as the weights' size below: the units of the space's ``fit:`` rule (None: unknown)
        memory = min((g.memory_mib for g in self.gpus or []), default=0.0)
        return round(memory / 1024, 1) if memory else None

    @property
    def compute_cap(self) -> float | None:
        caps = [g.compute_cap for g in self.gpus or [] if g.compute_cap is not None]
        return min(caps) if caps else None


def _python(host: Host, recognised: Recognised, env: dict[str, str], notes: list[Note]) -> str:
    """The host's Python the engine runs on: the command's own, else the console script's."""
    if recognised.python:
        return recognised.python
    script = f'p=$(command -v {shlex.quote(recognised.program[0])}) && head -n 1 "$p"'
    result = host.run(script, env=env, timeout=30.0)
    match = re.match(r"^#!\s*(\S+python[\w.]*)\s*$", result.stdout.strip()) if result.ok else None
    if match:
        return match.group(1)
    notes.append(
        Note(
            f"the Python behind `{recognised.program[0]}` could not be read",
            "python3 (set host.python to the engine's interpreter if that is wrong)",
        )
    )
    return "python3"


def _help(host: Host, recognised: Recognised, env: dict[str, str]) -> EngineFlags:
    program = " ".join(shlex.quote(word) for word in recognised.program)
    result = host.run(f"{program} --help", env=env, timeout=180.0)
    text = result.stdout + "\n" + result.stderr
    if "--help=all" in text:  # vLLM shows its groups only, unless asked for every flag
        more = host.run(f"{program} --help=all", env=env, timeout=180.0)
        if more.ok:
            text += "\n" + more.stdout
    flags = parse_help(text)
    if not result.ok or len(flags.flags) < 3:
        raise TunerError(
            f"tuner init: `{program} --help` on {host.name} gave {result.summary()}; "
            "fix: install the engine there, or give the command with its venv's python"
        )
    return flags


def _gpus(host: Host, env: dict[str, str], notes: list[Note]) -> list[Gpu] | None:
    result = host.run(
        f"command -v nvidia-smi >/dev/null || exit 127; nvidia-smi {_GPU_QUERY}",
        env=env,
        timeout=60.0,
    )
    if result.exit_code == 127:
        notes.append(
            Note(
                "no nvidia-smi on the host",
                "a CPU host: no GPU memory, parallel or CUDA-graph parameters",
            )
        )
        return None
    try:
        rows = (
            parse_gpu_csv(result.stdout, ("index", "name", "memory.total", "compute_cap"))
            if result.ok
            else []
        )
    except ValueError:
        rows = []
    if not rows:
        notes.append(
            Note(f"nvidia-smi gave {result.summary()}", "no GPUs: no parallel parameters")
        )
        return None
    gpus = []
    for row in rows:
        cap = row.values.get("compute_cap")
        try:
            cap_value = float(cap) if cap is not None else None
        except ValueError:
            cap_value = None
        gpus.append(
            Gpu(str(row.values.get("name", "?")), float(row.memory_total_mib or 0.0), cap_value)
        )
    return gpus


def _model(
    host: Host,
    python: str,
    model: str | None,
    model_root: Path | None,
    env: dict[str, str],
    notes: list[Note],
) -> ModelFacts | None:
    if model is None:
        notes.append(
            Note("the command names no model", "a dense model: no MoE or speculative parameters")
        )
        return None
    where = (
        str(model_root / model.lstrip("/"))
        if model_root is not None and model.startswith("/")
        else model
    )
    code = f"{shlex.quote(python)} -c {shlex.quote(_MODEL_SCRIPT)} {shlex.quote(where)}"
    result = host.run(code, env=env, timeout=60.0)
    try:
        found = (
            json.loads(result.stdout.strip().splitlines()[-1])
            if result.ok and result.stdout.strip()
            else None
        )
    except json.JSONDecodeError:
        found = None
    if not found:
        notes.append(
            Note(
                f"no config.json for {model} on {host.name}",
                "a dense model of unknown size: no MoE, speculative or fit: entries",
            )
        )
        return None
    facts = ModelFacts.from_config(model, found["config"], found.get("weights_bytes"))
    if facts.weights_gb is None:
        notes.append(
            Note(f"no weight files beside {model}/config.json", "their size unknown: no fit: rule")
        )
    return facts


def _patch_states(
    host: Host, python: str, env: dict[str, str], patches: list[PatchSpec], journal_dir: str
) -> dict[str, str]:
    manager = PatchManager(host, python=python, env=env, journal_dir=journal_dir, patches=patches)
    states: dict[str, str] = {}
    for patch in patches:
        try:
            states[patch.name] = manager.status(patch)
        except TunerError:
            states[patch.name] = "absent"
    return states


def read_host(
    host: Host,
    recognised: Recognised,
    profile: EngineProfile,
    model: str | None,
    *,
    env: dict[str, str],
    where: str,
    patches: list[PatchSpec],
    journal_dir: str,
    model_root: Path | None = None,
    python: str | None = None,
) -> HostFacts:
    """Read the engine's version and flags, the GPUs, the model and the patches' files.

    Args:
        env: the environment the server runs with (the command's ``NAME=value`` words, the
            emulated host's).
        model_root: the emulated host's folder: an absolute model path is read under it.
        python: the interpreter to use instead of the command's (the emulated host's).
    """
    notes: list[Note] = []
    python = python or _python(host, recognised, env, notes)
    version = None
    result = host.run(
        f"{shlex.quote(python)} -c {shlex.quote(profile.version_code)}", env=env, timeout=120.0
    )
    if result.ok and result.stdout.strip():
        version = result.stdout.strip().splitlines()[-1].strip()
    else:
        notes.append(
            Note(
                f"{profile.package} does not import with {python} ({result.summary(120)})",
                "no engine_version: in the space (doctor will not compare it)",
            )
        )
    flags = _help(host, recognised, env)
    gpus = _gpus(host, env, notes)
    facts = _model(host, python, model, model_root, env, notes)
    states = _patch_states(host, python, env, patches, journal_dir) if patches and version else {}
    return HostFacts(where, python, version, flags, gpus, facts, states, notes)


def assumed_host(recognised: Recognised, where: str, reason: str, gpus: int) -> HostFacts:
    """The host ``init`` could not reach, assumed: SGLang 0.5.9's flags as recorded from its
    wheel (the emulator's table), ``gpus`` GPUs of unknown kind, the model not read.

    Raises:
        TunerError: an engine other than SGLang, whose flags ``tuner`` has no record of.
    """
    if recognised.engine != "sglang":
        raise TunerError(
            f"tuner init: {reason}; the {recognised.engine} flags cannot be read "
            "(tuner records SGLang's only); fix: make the host reachable (`ssh` to it), or "
            "run tuner init on the GPU host with --host local"
        )
    from tuner.emulator.cli_args import build_parser
    from tuner.emulator.sglang_flags import SGLANG_VERSION

    notes = [
        Note(
            f"{where} could not be reached ({reason})",
            f"SGLang {SGLANG_VERSION}'s flags as recorded from its wheel; {gpus} GPU(s) of unknown "
            "memory and kind (your command's parallel sizes); the model not read: run tuner init "
            "again once the host answers",
        )
    ]
    flags = parse_help(build_parser().format_help())
    return HostFacts(
        where, "python3", None, flags, [Gpu("unknown GPU", 0.0, None)] * gpus, None, {}, notes
    )
