"""The POSIX shell scripts behind the server lifecycle, shared by the local and SSH transports.

Each function returns one script as a string; every value that enters it goes through
:func:`shlex.quote` (or is an integer the function formats itself). The scripts read ``/proc``
directly, so they need only ``sh``, ``cat``, ``awk`` and the util-linux ``setsid`` that every Linux
host has. A process is identified by its PID *and* its kernel start time (and the boot id), so a
PID that the kernel has since given to another process is never signalled.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from tuner.errors import ConfigError

__all__ = [
    "FROM_STDIN",
    "env_exports",
    "orphan_scan_script",
    "run_dir_scan_script",
    "start_script",
    "stop_script",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# The only command line a host ever sees for a script: the script itself (and the environment it
# exports, secrets included) travels on stdin, so no ``ps`` on the host shows it. ``cat`` reads it
# to its end first: the script's commands then find their stdin at its end, as with /dev/null.
FROM_STDIN = 'eval "$(cat)"'

# Shell functions used by several scripts. ``proc_state PID`` prints "STATE STARTTIME" of a
# process (nothing if it is gone); ``members PGID`` prints the live (non-zombie) PIDs of a process
# group; ``group_or_leader PGID STARTTIME`` the same, or the leader alone when it has not yet made
# its own group; ``listening PORT_HEX`` succeeds if a TCP socket listens on that port.
_FUNCTIONS = r"""
proc_state() {
  line=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  [ -n "$line" ] || return 0
  rest=${line##*) }
  set -- $rest
  printf '%s %s\n' "$1" "${20}"
}
members() {
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v pg="$1" '{
    s = $0; sub(/^.*\) /, "", s); split(s, a, " ");
    if (a[3] == pg && a[1] != "Z" && a[1] != "X") print $1 }'
}
group_or_leader() {  # PGID STARTTIME: the group's members, or the leader alone (still with
  m=$(members "$1")  # that start time) while it has not yet run setsid
  if [ -z "$m" ]; then
    case $(proc_state "$1") in "R $2"|"S $2"|"D $2"|"T $2"|"t $2"|"I $2") m=$1 ;; esac
  fi
  printf '%s' "$m"
}
listening() {
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p="$1" 'BEGIN { f = 0 } {
    split($2, a, ":"); if (toupper(a[2]) == p && $4 == "0A") f = 1 } END { exit f ? 0 : 1 }'
}
"""


def env_exports(env: Mapping[str, str] | None) -> str:
    """``export NAME=value`` lines for ``env``; a name that is not a shell identifier is refused.

    Raises:
        ConfigError: a variable name with characters a shell cannot export.
    """
    lines = []
    for name, value in (env or {}).items():
        if not _ENV_NAME.match(name):
            raise ConfigError(
                f"environment variable name {name!r} is not valid: use letters, digits and _"
            )
        lines.append(f"export {name}={shlex.quote(str(value))}")
    return "\n".join(lines) + ("\n" if lines else "")


def start_script(
    argv: Sequence[str],
    env: Mapping[str, str],
    run_dir: str,
    log_path: str,
    cwd: str,
    record_json_tail: str,
) -> str:
    """Start ``argv`` detached in its own session; print ``PID STARTTIME BOOT_ID``.

    ``nohup setsid CMD`` all exec, so ``$!`` is the server's own PID and, once ``setsid`` has
    run, its process group id too. ``env`` is exported by the script (which reaches the host on
    stdin), so no value of it is ever an argument of a process. What the script creates is
    private from the moment it exists (``umask 077``): the run folder (and its parents) 0700, the
    log, ``server.json`` and ``server.pid`` 0600; the server itself runs under ``umask 022``, as
    from a login shell. The record is written at once, before anything else:
    ``server.json`` (the handle, ``record_json_tail`` being the JSON object of the remaining fields
    without its opening brace; a process keeps its start time through ``exec``) and then
    ``server.pid``, so a tuner interrupted a moment after the spawn still finds its server
    (:meth:`Host.server_in`). Then it waits (at most 5 s) for ``setsid`` to have run.
    """
    if not argv:
        raise ConfigError("the server command line is empty: give the engine command")
    command = " ".join(shlex.quote(a) for a in argv)
    exports = env_exports(env)  # in the script's own environment: never on a command line
    rd, log = shlex.quote(run_dir), shlex.quote(log_path)
    return f"""{_FUNCTIONS}
{exports}umask 077
mkdir -p -- {rd} || exit 97
cd -- {shlex.quote(cwd)} || exit 98
rm -f -- {rd}/server.pid {log}
: > {log} || exit 99
umask 022
nohup setsid {command} > {log} 2>&1 < /dev/null &
pid=$!
umask 077
st=$(proc_state "$pid" | cut -d' ' -f2)
boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)
{{ printf '{{"pid": %s, "pgid": %s, "starttime": "%s", "boot_id": "%s", ' \
    "$pid" "$pid" "$st" "$boot"
  printf '%s\\n' {shlex.quote(record_json_tail)}; }} > {rd}/server.json.tmp
mv -f -- {rd}/server.json.tmp {rd}/server.json
printf '%s\\n' "$pid" > {rd}/server.pid
i=0
while [ "$i" -lt 250 ]; do
  line=$(cat "/proc/$pid/stat" 2>/dev/null) || break
  rest=${{line##*) }}
  set -- $rest
  [ "$3" = "$pid" ] && break
  [ "$1" = "Z" ] && break
  sleep 0.02
  i=$((i + 1))
done
printf '%s %s %s\\n' "$pid" "$st" "$boot"
"""


def stop_script(
    pid: int,
    starttime: str,
    boot_id: str,
    run_dir: str,
    *,
    grace_s: float,
    port: int | None,
    stop_command: str | None,
    port_wait_s: float,
    wait_gpu_s: float,
) -> str:
    """Stop the process group of ``pid``; print ``stopped`` and any of ``alive``/``port-busy``/
    ``gpu-busy`` for what did not end in time.

    Signals go to the group only while it is still the server's: the leader with the recorded
    start time, or (the leader gone) the group's remaining members, whose id the kernel cannot
    have reused while they live. ``stop_command`` (a container runtime's stop) runs first, in
    any case, then SIGTERM after ``grace_s``, SIGKILL after another grace period. Then it waits for the port to
    close and, where ``nvidia-smi`` exists, for the group's PIDs to leave ``--query-compute-apps``.
    """
    ticks = max(1, int(grace_s * 100))  # hundredths of a second
    port_ticks = max(1, int(port_wait_s * 10))
    gpu_ticks = max(0, int(wait_gpu_s * 2))
    port_hex = f"{port:04X}" if port else ""
    stop_part = ""
    if stop_command:  # always run: a container can outlive the client process that started it
        stop_part = (  # the folder and stop.log, if made here, private (umask 077)
            f"(umask 077 && mkdir -p -- {shlex.quote(run_dir)} && "
            f": >> {shlex.quote(run_dir)}/stop.log) 2>/dev/null\n"
            f"timeout {ticks // 100 + 1} sh -c {shlex.quote(stop_command)} "
            f">> {shlex.quote(run_dir)}/stop.log 2>&1\n"
            "ours && wait_gone " + str(ticks) + "\n"
        )
    return f"""{_FUNCTIONS}
pid={int(pid)}
st={shlex.quote(starttime)}
boot={shlex.quote(boot_id)}
ours() {{
  if [ -n "$boot" ] && [ "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" != "$boot" ]; then
    return 1
  fi
  s=$(proc_state "$pid")
  [ -z "$s" ] && return 0
  [ "${{s#* }}" = "$st" ]
}}
wait_gone() {{  # $1: hundredths of a second; polls fast at first, then every 0.1 s
  t=0
  alive=$(group_or_leader "$pid" "$st")
  while [ -n "$alive" ] && [ "$t" -lt "$1" ]; do
    if [ "$t" -lt 50 ]; then sleep 0.02; t=$((t + 2)); else sleep 0.1; t=$((t + 10)); fi
    alive=$(group_or_leader "$pid" "$st")
  done
}}
pids=""
alive=""
ours && pids=$(group_or_leader "$pid" "$st")
{stop_part}if ours; then
  alive=$(group_or_leader "$pid" "$st")
  if [ -n "$alive" ]; then
    kill -TERM "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    wait_gone {ticks}
  fi
  if [ -n "$alive" ]; then
    kill -KILL "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    wait_gone 500
  fi
  [ -n "$alive" ] && echo alive
fi
if [ -n {shlex.quote(port_hex)} ]; then
  n=0
  while listening {shlex.quote(port_hex)} && [ "$n" -lt {port_ticks} ]; do
    sleep 0.1
    n=$((n + 1))
  done
  listening {shlex.quote(port_hex)} && echo port-busy
fi
if [ -n "$pids" ] && [ {gpu_ticks} -gt 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
  n=0
  while :; do
    apps=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null) || break
    busy=0
    for a in $apps; do for p in $pids; do [ "$a" = "$p" ] && busy=1; done; done
    [ "$busy" = 0 ] && break
    [ "$n" -ge {gpu_ticks} ] && {{ echo gpu-busy; break; }}
    sleep 0.5
    n=$((n + 1))
  done
fi
[ -z "$alive" ] && rm -f -- {shlex.quote(run_dir)}/server.pid
echo stopped
"""


def orphan_scan_script(run_root: str, max_depth: int = 4) -> str:
    """One line ``RUN_DIR<TAB>PID<TAB>STATE STARTTIME`` per ``server.pid`` whose PID lives.

    The current boot id comes first, on a line of its own.
    """
    return f"""{_FUNCTIONS}
cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo
find {shlex.quote(run_root)} -maxdepth {int(max_depth)} -name server.pid -type f 2>/dev/null |
while IFS= read -r f; do
  pid=$(cat "$f" 2>/dev/null)
  case $pid in ''|*[!0-9]*) continue ;; esac
  s=$(proc_state "$pid")
  [ -n "$s" ] && printf '%s\\t%s\\t%s\\n' "${{f%/server.pid}}" "$pid" "$s"
done
"""


def run_dir_scan_script(run_root: str) -> str:
    """One line ``MTIME<TAB>PATH`` per folder directly under ``run_root`` that may be removed.

    Hidden folders and folders holding a patch journal (``patch-journal.json``, see
    :mod:`tuner.patches`) are left out: they outlive runs.
    """
    return (
        f"find {shlex.quote(run_root)} -mindepth 1 -maxdepth 1 -type d ! -name '.*' "
        "! -exec test -e '{}/patch-journal.json' ';' -printf '%T@\\t%p\\n' 2>/dev/null\n"
    )
