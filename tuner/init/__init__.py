"""``tuner init``: a search space written from the command the user runs today.

:func:`init_space` reads the command (:mod:`._command`: which engine, its model, its flags), the
host as ``tuner doctor`` reads it (:mod:`._host`: the engine's version and ``--help``, the GPUs,
the model's ``config.json``, the patches' files), chooses the levers this engine version, these
GPUs and this model allow (:mod:`._levers`), and writes the YAML with a comment on every choice
(:mod:`._render`). The user's command is the baseline. A flag the installed engine does not know
is refused (exit 2, with the closest flag it knows); what could not be read is a note in the file
and on the terminal, with what was assumed.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from tuner.engines import load_profile
from tuner.errors import ConfigError, TunerError
from tuner.host import Host, HostSpec, LocalHost, open_host
from tuner.init._command import LaunchCommand, Recognised, read_flags, recognise
from tuner.init._help import EngineFlags, FlagInfo
from tuner.init._host import HostFacts, Note, assumed_host, read_host
from tuner.init._levers import KNOWN_PATCHES, choose_levers
from tuner.init._plan import Plan
from tuner.init._render import DEFAULT_PORTS, SpaceText, Workload, render_space
from tuner.init._workload import choose_levels, parse_levels

__all__ = ["InitOptions", "InitResult", "init_space"]


@dataclass(frozen=True)
class InitOptions:
    """``tuner init``'s options."""

    out: Path | None = None
    host: str | None = None  # [user@]address[:port] or local
    ssh_key: str | None = None
    known_hosts: str | None = None
    accept_new_host_key: bool = False
    emulate: bool = False
    levels: str | None = None
    input_len: int = 256
    output_len: int = 256
    dataset: str | None = None
    force: bool = False


@dataclass
class InitResult:
    """What was written, and what the terminal summary says."""

    path: Path
    command: LaunchCommand
    facts: HostFacts
    plan: Plan
    notes: list[Note] = field(default_factory=list)


def _name(command_model: str | None, engine: str) -> str:
    base = (command_model or engine).rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^a-z0-9.-]+", "-", base.lower()).strip("-.") or engine


def _host_fields(options: InitOptions) -> tuple[HostSpec, dict[str, object] | str]:
    from tuner.study.trial import parse_host_option

    if not options.host or options.host == "local":
        return HostSpec(), "local"
    fields = parse_host_option(options.host)
    if options.ssh_key:
        fields["key_path"] = os.path.expanduser(options.ssh_key)
    if options.known_hosts:
        fields["known_hosts"] = os.path.expanduser(options.known_hosts)
    spec = HostSpec(**fields, accept_new_host_key=options.accept_new_host_key)  # type: ignore[arg-type]
    written: dict[str, object] = {
        k: v for k, v in fields.items() if k not in ("key_path", "known_hosts")
    }
    if options.ssh_key:
        written["key"] = options.ssh_key
    if options.known_hosts:
        written["known_hosts"] = options.known_hosts
    return spec, written


def _refuse_unknown(command: LaunchCommand, facts: HostFacts) -> None:
    for flag in command.flags:
        if flag.name in ("--host", "--port") or facts.flags.known(flag.name):
            continue
        close = facts.flags.suggestion(flag.name)
        hint = f"did you mean {close}?" if close else "drop it or check `--help`"
        raise ConfigError(
            f"tuner init: the command: {flag.name} is not a flag of the installed {command.engine} "
            f"{facts.engine_version or ''} on {facts.where}".replace("  ", " ")
            + f"; fix: {hint}"
        )


def _reached(host: Host) -> str | None:
    """None when the host answers; else why not (an SSH failure, a refused key)."""
    try:
        result = host.run("echo ok", timeout=30.0)
    except TunerError as error:
        return str(error)
    return (
        None
        if result.ok and result.stdout.strip() == "ok"
        else f"`echo ok` gave {result.summary()}"
    )


_PARALLEL_FLAGS = {
    "--tp-size": "tp",
    "--tensor-parallel-size": "tp",
    "--pp-size": "pp",
    "--pipeline-parallel-size": "pp",
    "--dp-size": "dp",
    "--data-parallel-size": "dp",
    "-tp": "tp",  # vLLM's short spellings
    "-pp": "pp",
    "-dp": "dp",
}


def _command_gpus(recognised: Recognised) -> int:
    """The GPUs the command's own parallel sizes use: tp x pp x dp (dp inside tp with SGLang's
    DP attention)."""
    # the layout's flags alone: an abbreviation of one (`--tp 8`) is read as the flag
    command = read_flags(
        recognised, EngineFlags({flag: FlagInfo(True) for flag in _PARALLEL_FLAGS})
    )
    sizes = {"tp": 1, "pp": 1, "dp": 1}
    for flag, name in _PARALLEL_FLAGS.items():
        value = command.value(flag)
        if isinstance(value, str) and value.isdigit():
            sizes[name] = int(value)
    if command.has("--enable-dp-attention"):
        sizes["dp"] = 1
    return sizes["tp"] * sizes["pp"] * sizes["dp"]


def _port(host: Host | None, recognised: Recognised, facts: HostFacts) -> int:
    """The server's port: the command's, else the engine's default, else (in use on the host)
    the next free one above it, with a note."""
    given = next(
        (
            w.partition("=")[2] or (recognised.rest[i + 1] if i + 1 < len(recognised.rest) else "")
            for i, w in enumerate(recognised.rest)
            if w.partition("=")[0] == "--port"
        ),
        None,
    )
    if given and given.isdigit():
        return int(given)
    default = DEFAULT_PORTS[recognised.engine]
    for port in range(default, default + 50) if host is not None else ():
        assert host is not None
        try:
            if host.port_free(port):
                if port != default:
                    facts.notes.append(
                        Note(
                            f"port {default} (the engine's default) is in use on {facts.where}",
                            f"port {port}, free when read",
                        )
                    )
                return port
        except TunerError:
            break
    return default


@dataclass
class _Reading:
    """Where the host is read: the host, the environment and Python to read it with, and what
    the written space says of it."""

    host: Host
    recognised: Recognised  # the program to ask for --help (the emulated host's own python3)
    env: dict[str, str]
    where: str
    journal: str
    section: dict[str, object] | str  # the space's host: section
    model_root: Path | None = None
    python: str | None = None


def _open(options: InitOptions, recognised: Recognised, out: Path) -> _Reading:
    env = dict(recognised.env)
    if not options.emulate:
        spec, section = _host_fields(options)
        where = "local" if spec.is_local else options.host or spec.address
        run_root = os.path.expanduser(spec.run_root) if spec.is_local else spec.run_root
        return _Reading(
            open_host(spec), recognised, env, where, f"{run_root}/patch-journal", section
        )
    if recognised.engine != "sglang":
        raise ConfigError(
            f"tuner init: --emulate: the emulated host runs SGLang only, not "
            f"{recognised.engine}; fix: drop --emulate, or give an SGLang command"
        )
    from tuner.emulator.host_root import prepare_host_root
    from tuner.init._emulated import lay_out_model

    root = (
        Path("studies") / f"{out.stem}-emulated.host"
    ).resolve()  # where optimize --emulate runs it
    env.update(prepare_host_root(root))
    lay_out_model(root)
    # the emulated host's python3 runs its stand-in sglang, whatever Python the command names
    program = replace(recognised, program=("python3", "-m", "sglang.launch_server"))
    return _Reading(
        LocalHost(str(root / "runs")),
        program,
        env,
        "the emulated GLM-5 host",
        str(root / "runs" / "patch-journal"),
        "local",
        root,
        "python3",
    )


def _read(reading: _Reading, recognised: Recognised, model: str | None) -> tuple[HostFacts, int]:
    """The host's facts and the server's port; an unreachable host is assumed (and said)."""
    try:
        reached = _reached(reading.host)
        if reached is not None:
            facts = assumed_host(recognised, reading.where, reached, _command_gpus(recognised))
            return facts, _port(None, recognised, facts)
        facts = read_host(
            reading.host,
            reading.recognised,
            load_profile(recognised.engine),
            model,
            env=reading.env,
            where=reading.where,
            patches=KNOWN_PATCHES.get(recognised.engine, []),
            journal_dir=reading.journal,
            model_root=reading.model_root,
            python=reading.python,
        )
        return facts, _port(reading.host, recognised, facts)
    finally:
        reading.host.close()


def init_space(words: list[str], options: InitOptions) -> InitResult:
    """Read the command and the host, write the space to ``options.out`` (or ``<model>.yaml``).

    Raises:
        ConfigError: the command is not one tuner knows, names a flag the engine does not
            take, an option is wrong, or the output exists (exit 2).
        TunerError: the engine's ``--help`` could not be run on the host (exit 1).
    """
    recognised = recognise(words)
    profile = load_profile(recognised.engine)
    model = read_flags(recognised).model  # the model, before the flag list is read
    out = options.out or Path(f"{_name(model, recognised.engine)}.yaml")
    if out.exists() and not options.force:
        raise ConfigError(
            f"tuner init: --out {out}: the file exists; fix: give another --out, or --force to replace it"
        )
    if options.levels:
        parse_levels(options.levels)  # bad input stops before the host is read
    if options.dataset and not Path(options.dataset).is_file():
        raise ConfigError(
            f"tuner init: --dataset {options.dataset}: no such file; fix: give your traffic's file"
        )
    reading = _open(options, recognised, out)
    facts, port = _read(reading, recognised, model)
    command = read_flags(recognised, facts.flags, profile.parallel_flags.values())
    _refuse_unknown(command, facts)
    section = reading.section
    if not options.emulate and facts.python != "python3":  # a venv's or a console script's Python
        section = (
            {**section, "python": facts.python}
            if isinstance(section, dict)
            else {"address": "local", "python": facts.python}
        )
    chosen = choose_levels(command, options.levels)
    plan = choose_levers(command, facts, chosen.levels)
    dataset = str(Path(options.dataset).resolve()) if options.dataset else None
    text = render_space(
        SpaceText(
            name=out.stem,
            command=command,
            facts=facts,
            plan=plan,
            workload=Workload(
                chosen.levels, chosen.why, options.input_len, options.output_len, dataset
            ),
            host=section,
            emulated=options.emulate,
            original=_shown(words, profile.secret_flags),
            port=port,
            secret_flags=tuple(profile.secret_flags),
        )
    )
    _write_checked(out, text)
    return InitResult(out, command, facts, plan, facts.notes)


def _shown(words: list[str], secret_flags: list[str]) -> str:
    """The command for the file's header, a secret's value (a flag the profile lists, or a
    ``NAME=value`` whose name says secret) shown as ``***``."""
    from tuner.space import is_secret_name

    shown, hide_next = [], False
    for word in words:
        name, eq, _ = word.partition("=")
        if hide_next:
            shown.append("***")
        elif eq and (name in secret_flags or (not name.startswith("-") and is_secret_name(name))):
            shown.append(f"{name}=***")
        else:
            shown.append(word)
        hide_next = not hide_next and not eq and word in secret_flags
    return shlex.join(shown)


def _write_checked(out: Path, text: str) -> None:
    """Write ``text`` to ``out`` once the space loader accepts it (a refusal is a bug of init's)."""
    from tuner.space import load_space

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(f".{out.name}.init-{os.getpid()}.yaml")
    staging.write_text(text)
    try:
        load_space(staging)
    except ConfigError as error:
        staging.unlink()
        raise TunerError(
            f"tuner init wrote a space its loader refuses ({error}); please report it"
        ) from None
    staging.replace(out)
