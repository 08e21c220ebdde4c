"""Preflight checks (``tuner doctor``): is the host ready for a study, and if not, what to do.

Each check is a function of explicit values that returns a :class:`Check` (pass or fail, what was
found, and the fix). None raises for a problem it checks: an unreachable host or a missing tool is
a failed check. :func:`format_checks` renders them for the terminal.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rich.markup import escape

from tuner.errors import TunerError
from tuner.host import STALE_AFTER_S, Host, ServerHandle, read_claim
from tuner.patches import PatchManager, PatchSpec
from tuner.telemetry import parse_gpu_csv

__all__ = [
    "Check",
    "check_client_capacity",
    "check_disk",
    "check_engine_version",
    "check_flags_known",
    "check_gpus",
    "check_gpus_idle",
    "left_servers",
    "LeftServer",
    "check_host_claim",
    "check_patches",
    "check_port_free",
    "check_python",
    "check_reachable",
    "format_checks",
]

_FLAG = re.compile(r"(?<![\w-])--[A-Za-z0-9][A-Za-z0-9_-]*")
_GPU_FIELDS = ("index", "name", "memory.total", "compute_cap")


@dataclass(frozen=True)
class Check:
    """One preflight check's verdict: ``fix`` says what to do when ``ok`` is False."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def _failed_run(name: str, what: str, error: TunerError) -> Check:
    return Check(name, False, f"{what}: {error}", "make the host reachable, then run doctor again")


def check_reachable(host: Host) -> Check:
    """The host answers a trivial command (over SSH: connects with the configured key)."""
    started = time.monotonic()
    try:
        result = host.run("echo ok", timeout=30.0)
    except TunerError as error:
        return Check(
            "reachable",
            False,
            str(error),
            "check host.address/port/user/key_path (or ~/.ssh/config) and known_hosts",
        )
    if not result.ok or result.stdout.strip() != "ok":
        return Check(
            "reachable",
            False,
            f"`echo ok` gave {result.summary()}",
            "check the login shell of the user on the host",
        )
    return Check("reachable", True, f"{host.name} answers ({time.monotonic() - started:.2f} s)")


def check_python(host: Host, python: str, env: Mapping[str, str]) -> Check:
    """The host's Python runs; its version is reported (3.10 or newer is needed by SGLang)."""
    code = "import sys; print('%d.%d.%d' % sys.version_info[:3])"
    try:
        result = host.run(f"{shlex.quote(python)} -c {shlex.quote(code)}", env=env, timeout=60.0)
    except TunerError as error:
        return _failed_run("python", python, error)
    if not result.ok:
        return Check(
            "python",
            False,
            f"{python} does not run ({result.summary()})",
            "set host.python to the interpreter SGLang is installed in",
        )
    version = result.stdout.strip()
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) < (3, 10):
        return Check(
            "python",
            False,
            f"{python} is Python {version}",
            "use a Python 3.10+ environment on the host (host.python)",
        )
    return Check("python", True, f"{python} is Python {version}")


def check_engine_version(
    host: Host, python: str, env: Mapping[str, str], version_code: str, expected: str | None
) -> Check:
    """The engine imports and has the expected version (``0.5.9``, or a prefix like ``0.5``)."""
    try:
        result = host.run(
            f"{shlex.quote(python)} -c {shlex.quote(version_code)}", env=env, timeout=120.0
        )
    except TunerError as error:
        return _failed_run("engine version", "importing the engine", error)
    if not result.ok or not result.stdout.strip():
        return Check(
            "engine version",
            False,
            f"the engine does not import ({result.summary()})",
            "install the engine into host.python's environment",
        )
    version = result.stdout.strip().splitlines()[-1].strip()
    if expected and not (version == expected or version.startswith(expected.rstrip(".") + ".")):
        return Check(
            "engine version",
            False,
            f"installed {version}, the search space expects {expected}",
            f"install {expected} on the host, or set engine_version: "
            f"{version} after checking the flags and patches",
        )
    return Check("engine version", True, f"installed {version}")


def _query_gpus(
    host: Host, queries: Sequence[str], env: Mapping[str, str] | None
) -> list[str] | None:
    """The outputs of ``nvidia-smi QUERY`` for each query (one round trip), None without it.

    Raises:
        TunerError: nvidia-smi exists but fails.
    """
    marker = "@@tuner-next-query@@"
    script = "command -v nvidia-smi >/dev/null || exit 127\n" + f"\necho {marker}\n".join(
        f"nvidia-smi {query} || exit $?" for query in queries
    )
    result = host.run(script, env=env, timeout=60.0)
    if result.exit_code == 127:
        return None
    if not result.ok:
        raise TunerError(f"nvidia-smi failed ({result.summary()})")
    return result.stdout.split(marker + "\n")


def check_gpus(host: Host, min_count: int | None, env: Mapping[str, str] | None = None) -> Check:
    """The GPUs ``nvidia-smi`` lists (name, memory, compute capability): ``min_count`` or more."""
    query = f"--query-gpu={','.join(_GPU_FIELDS)} --format=csv,noheader,nounits"
    try:
        outputs = _query_gpus(host, [query], env)
        present = outputs is not None
        gpus = parse_gpu_csv(outputs[0], _GPU_FIELDS) if outputs is not None else []
    except (TunerError, ValueError) as error:
        return Check("gpus", False, str(error), "check the NVIDIA driver on the host (nvidia-smi)")
    if not present:
        if min_count:
            return Check(
                "gpus",
                False,
                "nvidia-smi not found on the host",
                "install the NVIDIA driver, or add its bin folder to PATH",
            )
        return Check("gpus", True, "no nvidia-smi: a CPU host, GPU checks skipped")
    kinds = sorted(
        {
            f"{g.values.get('name', '?')} ({g.memory_total_mib or 0:.0f} MiB, "
            f"compute_cap {g.values.get('compute_cap', '?')})"
            for g in gpus
        }
    )
    detail = f"{len(gpus)} GPU(s): {'; '.join(kinds)}"
    if min_count and len(gpus) < min_count:
        return Check(
            "gpus",
            False,
            detail,
            f"the configuration needs {min_count} GPUs: "
            f"lower --tp-size or use a host with more GPUs",
        )
    return Check("gpus", True, detail)


@dataclass(frozen=True)
class LeftServer:
    """A server a killed tuner left running under the run root (``tuner optimize`` stops it
    before anything else), and the PIDs of its process group (its GPU workers among them)."""

    handle: ServerHandle
    pids: frozenset[int]


def left_servers(host: Host) -> list[LeftServer]:
    """The servers killed tuners left under the host's run root (none when that cannot be
    read: the checks then treat what they find as another user's)."""
    try:
        handles = host.find_orphans()
        if not handles:
            return []
        listing = host.run("ps -e -o pid=,pgid=", timeout=30.0).stdout
    except TunerError:
        return []
    groups: dict[int, set[int]] = {}
    for line in listing.splitlines():
        cells = line.split()
        if len(cells) == 2 and cells[0].isdigit() and cells[1].isdigit():
            groups.setdefault(int(cells[1]), set()).add(int(cells[0]))
    return [LeftServer(h, frozenset(groups.get(h.pgid, set()) | {h.pid})) for h in handles]


def check_gpus_idle(
    host: Host,
    own_pids: Iterable[int] = (),
    env: Mapping[str, str] | None = None,
    max_hidden_mib: float = 2048.0,
    left: Sequence[LeftServer] = (),
    server_gpus: frozenset[int] | None = None,
) -> Check:
    """No GPU the server will use is used by another user's process (a shared host must not be
    disturbed); ``server_gpus`` (``handover.server_gpus``; None: every GPU) are those GPUs, so
    another user's job on another GPU of the host does not fail the check.

    A listed compute process other than ``own_pids`` fails the check, and so does memory in use
    on a GPU beyond what its listed processes hold by more than ``max_hidden_mib``: processes of
    another container are not listed, their memory is (a CUDA context's own overhead, about
    1 GiB, stays under the default).
    """
    queries = [
        "--query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits",
        "--query-gpu=index,uuid,memory.used --format=csv,noheader,nounits",
    ]
    try:
        outputs = _query_gpus(host, queries, env)
        if outputs is None:
            return Check("gpus idle", True, "no nvidia-smi: nothing to check")
        gpus = parse_gpu_csv(outputs[1], ("index", "uuid", "memory.used"))
    except (TunerError, ValueError) as error:
        return Check("gpus idle", False, str(error), "check the NVIDIA driver on the host")
    if server_gpus is not None:
        gpus = [gpu for gpu in gpus if gpu.index in server_gpus]
    watched = None if server_gpus is None else {gpu.values.get("uuid", "") for gpu in gpus}
    own = {int(pid) for pid in own_pids}
    left_pids = {pid for server in left for pid in server.pids}
    stopped_tuners: set[str] = set()  # PIDs of servers killed tuners left
    held: dict[str, float] = {}  # GPU uuid -> MiB its listed processes hold
    others: dict[str, tuple[str, int, float]] = {}  # PID -> (name, GPUs, MiB)
    for line in outputs[0].splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if (
            len(cells) < 4
            or not cells[0].isdigit()
            or (watched is not None and cells[3] not in watched)
        ):
            continue
        memory = float(cells[2]) if cells[2].replace(".", "", 1).isdigit() else 0.0
        held[cells[3]] = held.get(cells[3], 0.0) + memory
        if int(cells[0]) in left_pids:
            stopped_tuners.add(cells[0])
        elif int(cells[0]) not in own:
            _, count, total = others.get(cells[0], (cells[1], 0, 0.0))
            others[cells[0]] = (cells[1], count + 1, total + memory)
    foreign = [
        f"PID {pid} {name} on {count} GPU(s), {total:.0f} MiB"
        for pid, (name, count, total) in others.items()
    ]
    for gpu in gpus:
        hidden = (gpu.memory_used_mib or 0.0) - held.get(gpu.values.get("uuid", ""), 0.0)
        if hidden > max_hidden_mib:
            foreign.append(f"GPU {gpu.index}: {hidden:.0f} MiB held by processes not listed here")
    if foreign:
        return Check(
            "gpus idle",
            False,
            f"busy with other processes: {'; '.join(foreign)}",
            "wait until they end or ask their owner; the tuner never stops them",
        )
    if stopped_tuners:
        return Check(
            "gpus idle",
            True,
            (
                f"no other process on the {len(gpus)} GPU(s) but PID(s) "
                f"{', '.join(sorted(stopped_tuners, key=int))} of a server a stopped tuner left "
                "running; `tuner optimize` stops it first"
            ),
        )
    which = "" if server_gpus is None else " the server uses"
    return Check("gpus idle", True, f"no other process on the {len(gpus)} GPU(s){which}")


def check_flags_known(
    host: Host,
    help_command: str,
    env: Mapping[str, str],
    flags: Sequence[str],
    version: str | None = None,
) -> Check:
    """Every flag of the search space appears in the installed engine's ``--help``.

    Names change between versions. A unique prefix of one flag is accepted (argparse does), an
    ambiguous one is not (0.5.21 rejects ``--cuda-graph-max-bs`` that way).
    """
    try:
        result = host.run(help_command, env=env, timeout=180.0)
    except TunerError as error:
        return _failed_run("flags known", help_command, error)
    known = set(_FLAG.findall(result.stdout + "\n" + result.stderr))
    if not result.ok or not known:
        return Check(
            "flags known",
            False,
            f"`{help_command}` gave {result.summary()}",
            "check that the engine is installed for host.python",
        )
    installed = f"the installed version ({version})" if version else "the installed version"
    problems = []
    for flag in flags:
        name = "--" + flag.split("=", 1)[0].lstrip("-")
        if name in known:
            continue
        matches = sorted(k for k in known if k.startswith(name))
        if len(matches) > 1:
            problems.append(f"{name} is ambiguous ({', '.join(matches[:4])})")
        elif not matches:
            problems.append(f"{name} is unknown")
    if problems:
        return Check(
            "flags known",
            False,
            f"{'; '.join(problems)} in {installed}",
            f"rename or drop these dimensions for {installed}, or install the version "
            f"the search space was written for",
        )
    return Check("flags known", True, f"{len(flags)} flag(s) known to {installed}")


def check_port_free(host: Host, port: int, left: Sequence[LeftServer] = ()) -> Check:
    """Nothing listens on the server's port yet."""
    try:
        free = host.port_free(port)
    except TunerError as error:
        return _failed_run("port free", f"port {port}", error)
    if not free:
        mine = [server.handle for server in left if server.handle.port == port]
        if mine:
            return Check(
                "port free",
                True,
                (
                    f"port {port} is held by a server a stopped tuner left running (PID "
                    f"{mine[0].pid}, {mine[0].run_dir}); `tuner optimize` stops it first"
                ),
            )
        return Check(
            "port free",
            False,
            f"port {port} is in use on {host.name}",
            "stop what listens there (`ss -ltnp`) or choose another server.port",
        )
    return Check("port free", True, f"port {port} is free")


def check_disk(host: Host, path: str, min_free_gb: float = 1.0) -> Check:
    """The folder for run folders (or its nearest existing parent) has room for logs."""
    script = (
        f'p={shlex.quote(path)}; while [ ! -e "$p" ] && [ "$p" != / ]; do '
        f'p=$(dirname "$p"); done; df -Pk "$p" | tail -n 1'
    )
    try:
        result = host.run(script, timeout=30.0)
    except TunerError as error:
        return _failed_run("disk", path, error)
    fields = result.stdout.split()
    if not result.ok or len(fields) < 4 or not fields[3].isdigit():
        return Check("disk", False, f"df on {path} gave {result.summary()}", "check host.run_root")
    free_gb = int(fields[3]) / 1024 / 1024
    if free_gb < min_free_gb:
        return Check(
            "disk",
            False,
            f"{free_gb:.2f} GB free for {path}",
            f"free at least {min_free_gb:g} GB or move host.run_root",
        )
    return Check("disk", True, f"{free_gb:.1f} GB free for {path}")


def check_host_claim(host: Host, run_root: str, stale_after_s: float = STALE_AFTER_S) -> Check:
    """No other tuner holds the host (``<run_root>/tuner.claim``). Read only: never claims it."""
    try:
        held = read_claim(host, run_root)
    except TunerError as error:
        return _failed_run("host not claimed", run_root, error)
    if held is None:
        return Check("host not claimed", True, "no other tuner runs on this host")
    if held.mine:
        return Check("host not claimed", True, "claimed by this tuner")
    if held.stale(stale_after_s):
        return Check(
            "host not claimed",
            True,
            f"a claim left by {held.who()} ({held.why_stale(stale_after_s)}) is taken over at the start",
        )
    return Check(
        "host not claimed",
        False,
        f"in use by {held.who()}, refreshed {held.age_s:.0f} s ago ({run_root.rstrip('/')}/tuner.claim)",
        "run one tuner per host (give this one another --host), or wait for that one to end",
    )


def check_patches(manager: PatchManager, patches: Sequence[PatchSpec]) -> list[Check]:
    """Each patch's file holds the text to find exactly once (so it applies and reverts)."""
    checks = []
    for patch in patches:
        name = f"patch {patch.name}"
        try:
            path = manager.locate(patch)
            left = manager.left_by_earlier_run(patch)
            state = manager.original_status(patch) if left else manager.status(patch)
        except TunerError as error:
            checks.append(Check(name, False, str(error), "drop or pin the dimension"))
            continue
        if state == "clean" and left:
            checks.append(
                Check(
                    name,
                    True,
                    (
                        f"applies to {path} (the file is patched now by a tuner run that was stopped; "
                        f"`tuner optimize` restores the original from {manager.journal_path} first)"
                    ),
                )
            )
        elif state == "clean":
            checks.append(Check(name, True, f"applies to {path}"))
        elif state == "applied":
            checks.append(
                Check(
                    name,
                    False,
                    f"{path} already holds the replacement (patched "
                    "upstream or by hand): the dimension has no effect",
                    "pin the dimension to the patched value, or drop it",
                )
            )
        else:
            checks.append(
                Check(
                    name, False, manager.mismatch_message(patch, path), "drop or pin the dimension"
                )
            )
    return checks


def check_client_capacity(
    host: Host,
    run_root: str,
    python: str,
    levels: Sequence[int],
    output_len: int,
    workers: int = 1,
) -> Check:
    """The client's own capacity at the study's top level and output length (the client's
    busiest level; one request a stream), against a server that streams as fast as it can on
    the host's loopback (:func:`tuner.loadgen.client_capacity`; through the SSH forward when the
    host is remote): the rate above which a level measures the client, said before any host
    time is spent. It fails only when the check cannot run."""
    from tuner.loadgen import client_capacity  # the load generator: only this check needs it

    top = max(levels)
    try:
        found = client_capacity(
            host, run_root, python, [top], output_len, workers=workers, requests=top
        )
    except TunerError as error:
        return Check(
            "client capacity",
            False,
            str(error),
            "check that the host's Python runs and a port in 29170-29229 is free on it",
        )
    best = max(found, key=lambda c: c.tokens_per_s)
    drives = [c for c in levels if c <= top]
    return Check(
        "client capacity",
        True,
        f"through {best.via}, output_len {output_len}: "
        + "; ".join(c.text() for c in found)
        + f". Levels {', '.join(map(str, sorted(drives)))} are measured as long as their server "
        f"serves under {best.tokens_per_s:,.0f} output tok/s; above it a level measures the client: "
        "it is run again with more client processes (up to this machine's cores), then counted "
        "as a lower bound",
    )


def format_checks(checks: Sequence[Check]) -> str:
    """One line per check (``PASS``/``FAIL``, the detail), the fix under a failure; rich markup."""
    lines = []
    for check in checks:
        mark = "[green]PASS[/green]" if check.ok else "[red]FAIL[/red]"
        lines.append(f"{mark} {escape(check.name)}: {escape(check.detail)}")
        if not check.ok and check.fix:
            lines.append(f"     fix: {escape(check.fix)}")
    return "\n".join(lines)
