"""The user's launch command, read: which engine it starts, its environment, model and flags.

Five forms are recognised (each may be prefixed by ``NAME=value`` environment assignments, and
the Python may be any interpreter, a venv's included):

- ``python -m sglang.launch_server --model-path M ...`` and ``sglang serve --model-path M ...``;
- ``python -m vllm.entrypoints.openai.api_server --model M ...`` and ``vllm serve M ...``;
- ``transformers serve M ...``.

The flags are split in two steps: :func:`recognise` finds the engine and the words before the
flags; :func:`read_flags` then reads the rest with the engine's own flag list (which flags take
a value), read from the host by :mod:`tuner.init._help`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from tuner.errors import ConfigError
from tuner.init._help import EngineFlags

__all__ = ["CommandFlag", "LaunchCommand", "Recognised", "read_flags", "recognise"]

_ENV_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE]-?\d+)?$")
_WHERE = "tuner init: the command"
_FORMS = (
    "python -m sglang.launch_server ..., sglang serve ..., vllm serve MODEL ..., "
    "python -m vllm.entrypoints.openai.api_server ..., transformers serve MODEL ..."
)
# The model's flag of each engine (where the command gives the model when it is not the argument
# after ``serve``): ``server.model_path`` of the written space.
_MODEL_FLAGS = {"sglang": ("--model-path", "--model"), "vllm": ("--model",), "transformers": ()}


@dataclass(frozen=True)
class Recognised:
    """The engine a command starts and the words before its flags.

    Attributes:
        engine: ``sglang``, ``vllm`` or ``transformers`` (a profile of ``tuner/engines``).
        program: the words that start the server, flags excluded (``python3 -m
            sglang.launch_server``, ``vllm serve``).
        python: the interpreter the command names (``/opt/venv/bin/python``), None for a
            console script (``vllm``, ``sglang``, ``transformers``).
        env: ``NAME=value`` words before the program.
        rest: the words after the program: the model argument and the flags.
    """

    engine: str
    program: tuple[str, ...]
    python: str | None
    env: dict[str, str]
    rest: tuple[str, ...]


@dataclass(frozen=True)
class CommandFlag:
    """One flag of the command: ``value`` None for a bare switch, a tuple for several values."""

    name: str
    value: str | tuple[str, ...] | None = None


@dataclass(frozen=True)
class LaunchCommand:
    """The command, read: engine, program, environment, model and flags in their order."""

    recognised: Recognised
    model: str | None
    model_flag: str | None  # the flag that gave the model; None: the argument after ``serve``
    flags: tuple[CommandFlag, ...] = field(default_factory=tuple)
    # what every spelling of a flag shares (the engine's :meth:`EngineFlags.key`): ``-tp``,
    # ``--tp`` and ``--tensor-parallel-size`` are one flag to :meth:`value` and :meth:`has`
    key: Callable[[str], str] = field(default=str, compare=False, repr=False)

    @property
    def engine(self) -> str:
        return self.recognised.engine

    def value(self, flag: str) -> str | tuple[str, ...] | None:
        """The value the command gives ``flag``, however spelled (None when absent or bare)."""
        key = self.key(flag)
        return next((f.value for f in self.flags if self.key(f.name) == key), None)

    def has(self, flag: str) -> bool:
        key = self.key(flag)
        return any(self.key(f.name) == key for f in self.flags)


def _module_engine(module: str) -> str | None:
    if module in ("sglang.launch_server", "sglang.launch_server.py"):
        return "sglang"
    if module in ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main"):
        return "vllm"
    return None


def recognise(words: list[str]) -> Recognised:
    """Which engine ``words`` start, or a :class:`ConfigError` naming the forms understood."""
    env: dict[str, str] = {}
    index = 0
    while index < len(words) and (match := _ENV_WORD.match(words[index])):
        env[match.group(1)] = match.group(2)
        index += 1
    if index < len(words) and words[index] == "env":  # `env A=1 python ...`
        index += 1
        while index < len(words) and (match := _ENV_WORD.match(words[index])):
            env[match.group(1)] = match.group(2)
            index += 1
    words = words[index:]
    if not words:
        raise ConfigError(
            f"{_WHERE}: no command after `--`; fix: give the command you start the "
            f"server with, e.g. tuner init -- vllm serve MODEL"
        )
    head = words[0].rsplit("/", 1)[-1]
    if re.match(r"^python(\d+(\.\d+)?)?$", head) and len(words) >= 3 and words[1] == "-m":
        engine = _module_engine(words[2])
        if engine is not None:
            return Recognised(engine, tuple(words[:3]), words[0], env, tuple(words[3:]))
    if head in ("sglang", "vllm", "transformers") and len(words) >= 2 and words[1] == "serve":
        return Recognised(head, tuple(words[:2]), None, env, tuple(words[2:]))
    raise ConfigError(
        f"{_WHERE}: `{' '.join(words[:3])}` starts no engine tuner knows; "
        f"fix: give one of: {_FORMS}"
    )


def _is_value(word: str) -> bool:
    """A word that is a flag's value rather than the next flag (negative numbers are values)."""
    return not word.startswith("-") or bool(_NUMBER.match(word))


def read_flags(
    recognised: Recognised,
    engine_flags: EngineFlags | None = None,
    preferred: Collection[str] = (),
) -> LaunchCommand:
    """Split the command's words into the model and its flags.

    Args:
        engine_flags: the engine's flags from its ``--help``: whether each takes a value (an
            unknown one: a following word that is not a flag is its value) and their
            spellings. A flag is read under the name the engine's parser reads it by (an
            abbreviation written out: ``--tp`` is ``--tp-size``), and where one of its
            spellings is in ``preferred`` (the engine profile's layout flags), under that one
            (vLLM's ``-tp`` is ``--tensor-parallel-size``). None: the words as written.
    """
    known = engine_flags or EngineFlags({})
    takes_value = known.takes_value()

    def named(word: str) -> str:
        spellings = known.spellings(word) if known.known(word) else (word,)
        return next((s for s in spellings if s in preferred), known.expand(word))

    model_flags = {known.key(f) for f in _MODEL_FLAGS[recognised.engine]}
    words = list(recognised.rest)
    model: str | None = None
    model_flag: str | None = None
    if (
        recognised.program[-1] == "serve"
        and recognised.engine in ("vllm", "transformers")
        and (words and not words[0].startswith("-"))
    ):
        model = words.pop(0)
    flags: list[CommandFlag] = []
    index = 0
    while index < len(words):
        word = words[index]
        if not word.startswith("-") or _NUMBER.match(word):
            raise ConfigError(
                f"{_WHERE}: {word!r} follows no flag; fix: give values after their "
                "flag (the model after `serve` or its flag)"
            )
        written, eq, inline = word.partition("=")
        name = named(written)
        index += 1
        if eq:
            value: str | tuple[str, ...] | None = inline
        elif takes_value.get(name) is False:
            value = None
        else:
            values = []
            while index < len(words) and _is_value(words[index]):
                values.append(words[index])
                index += 1
            value = None if not values else values[0] if len(values) == 1 else tuple(values)
        if known.key(name) in model_flags and isinstance(value, str) and model is None:
            model, model_flag = value, name
            continue
        flags.append(CommandFlag(name, value))
    return LaunchCommand(recognised, model, model_flag, tuple(flags), known.key)
