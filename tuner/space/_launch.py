"""The launch of one configuration: argv, environment, patches, and how secrets are kept out.

Variables whose name matches TOKEN, KEY, SECRET or PASSWORD (or whose value references such a
variable) are secrets: :meth:`LaunchSpec.masked_env` shows them as ``***`` (for storage) and
:meth:`LaunchSpec.shell_exports` writes them as ``${NAME:?}`` references (for scripts), never as
values. A fixed flag is a secret when the engine profile lists it (``secret_flags``: SGLang's
``--api-key`` and ``--admin-api-key``) or when its value is written as ``${NAME}``, never by a
word in its name (``--max-total-tokens`` is an ordinary flag): secret flags are kept out of
``argv`` (:attr:`LaunchSpec.secret_flags`; the server gets them in a 0600 file of its engine's
``--config`` format) and shown masked in :attr:`LaunchSpec.command_line`.
:meth:`LaunchSpec.secret_values` are the values a log or a stored message must never show.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from tuner.scrub import MASK
from tuner.space._param_base import value_text
from tuner.space._strict import ENV_REFERENCE

__all__ = [
    "LaunchSpec",
    "MASK",
    "is_secret_name",
    "is_secret_flag",
    "fixed_flag_args",
    "resolve_env",
    "MissingVariable",
    "secret_flags_yaml",
]

FlagValue = str | int | float | bool | list[Any]

_SECRET = re.compile(r"TOKEN|KEY|SECRET|PASSWORD", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether a variable of this name holds a secret (TOKEN, KEY, SECRET, PASSWORD in it)."""
    return bool(_SECRET.search(name))


def is_secret_flag(flag: str, value: object, listed: Collection[str] = ()) -> bool:
    """Whether a fixed flag carries a secret: the engine profile lists it (``listed``, its
    ``secret_flags``), or its value is written as a ``${NAME}`` reference. A word in the flag's
    name (``--max-total-tokens``, ``--tokenizer-path``) does not make it one."""
    return flag in listed or (isinstance(value, str) and bool(ENV_REFERENCE.search(value)))


def secret_flags_yaml(flags: Mapping[str, FlagValue]) -> str:
    """The engine's ``--config`` YAML for ``flags``, each value in its own type: a string quoted
    (``api-key: "..."``), ``true`` a YAML boolean (SGLang's config merger turns it into the bare
    flag), numbers and lists as such. JSON values are YAML."""
    import json

    return "".join(f"{flag.lstrip('-')}: {json.dumps(value)}\n" for flag, value in flags.items())


class MissingVariable(KeyError):
    """A ``${NAME}`` reference to a variable the tuner's environment does not have."""

    def __init__(self, variable: str, name: str) -> None:
        super().__init__(variable)
        self.variable = variable
        self.name = name


def resolve_env(
    template: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Replace every ``${NAME}`` in the values by the tuner's environment (``os.environ``)."""
    source = os.environ if environ is None else environ
    resolved: dict[str, str] = {}
    for name, text in template.items():

        def substitute(match: re.Match[str], name: str = name) -> str:
            if match.group(1) not in source:
                raise MissingVariable(match.group(1), name)
            return source[match.group(1)]

        resolved[name] = ENV_REFERENCE.sub(substitute, text)
    return resolved


def fixed_flag_args(flags: Mapping[str, Any]) -> list[str]:
    """The fixed flags as arguments: ``true`` bare, ``false``/``null`` left out, lists spread."""
    args: list[str] = []
    for flag, value in flags.items():
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, list):
            args += [flag, *(value_text(item) for item in value)]
        else:
            args += [flag, value_text(value)]
    return args


def _double_quoted(template: str) -> str:
    """``template`` inside double quotes, its ``${NAME}`` references as ``${NAME:?}``."""
    parts, last = [], 0
    for match in ENV_REFERENCE.finditer(template):
        parts.append(re.sub(r'([\\$`"])', r"\\\1", template[last : match.start()]))
        parts.append(f"${{{match.group(1)}:?}}")
        last = match.end()
    parts.append(re.sub(r'([\\$`"])', r"\\\1", template[last:]))
    return '"' + "".join(parts) + '"'


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one configuration's server.

    Attributes:
        argv: the command (split with shlex), ``--host``/``--port``, the fixed flags, then the
            active parameters' flags: a flag only when set, store_true flags bare.
        env: fixed environment plus environment parameters, ``${NAME}`` references resolved.
        patches: names of the source patches this configuration applies.
        warnings: reasons of the ``warn`` constraints that hold for this configuration.
        env_template: the environment as written (references unresolved), for scripts.
        secret_flags: fixed flags that carry secrets, resolved (``{"--api-key": value}``; a
            value written ``${NAME}`` as the variable's text, a literal in its YAML type): not in
            ``argv``; the server reads them from a 0600 file (its engine's ``--config``).
        secret_flag_templates: the same flags as written (``${NAME}`` or a literal value).
        api_key: the value of the engine's ``api_key_flag`` when set: what clients send as
            ``Authorization: Bearer ...``.
    """

    argv: list[str]
    env: dict[str, str]
    patches: frozenset[str] = frozenset()
    warnings: list[str] = field(default_factory=list)
    env_template: dict[str, str] = field(default_factory=dict)
    secret_flags: dict[str, FlagValue] = field(default_factory=dict)
    secret_flag_templates: dict[str, str] = field(default_factory=dict)
    api_key: str | None = None

    @property
    def command_line(self) -> str:
        """The command line with every value shell-quoted (safe to paste into a shell); secret
        flags shown as written when a ``${NAME}`` reference, else as ``***``: what is stored."""
        return shlex.join(self.argv + self.masked_secret_args())

    @staticmethod
    def shell_join(words: list[str]) -> str:
        """``words`` as one bash command line: each quoted as it is, except a word that holds a
        ``${NAME}`` reference (``server.model_path: ${TUNER_MODEL_DIR}``), which is double-quoted
        as ``"${NAME:?}"`` so that bash expands it (and stops when NAME is unset)."""
        return " ".join(
            _double_quoted(w) if ENV_REFERENCE.search(w) else shlex.quote(w) for w in words
        )

    def shell_secret_args(self) -> str:
        """The secret flags for a bash script: `` --api-key "${NAME:?}"`` (a literal secret as
        ``${TUNER_SECRET_API_KEY:?}``, to be set by whoever runs the script), never values."""
        words = []
        for flag in self.secret_flags:
            template = self.secret_flag_templates.get(flag, "")
            if ENV_REFERENCE.search(template):
                words.append(f"{flag} {_double_quoted(template)}")
            else:
                name = "TUNER_SECRET_" + re.sub(r"[^A-Za-z0-9]", "_", flag.lstrip("-")).upper()
                words.append(f'{flag} "${{{name}:?}}"')
        return "".join(" " + word for word in words)

    def masked_secret_args(self) -> list[str]:
        """The secret flags as ``[flag, ${NAME} or ***, ...]``: never their values."""
        masked: list[str] = []
        for flag in self.secret_flags:
            template = self.secret_flag_templates.get(flag, "")
            masked += [flag, template if ENV_REFERENCE.search(template) else MASK]
        return masked

    def secret_names(self) -> set[str]:
        """Variables that are secrets by name, or whose value references one."""
        secret = set()
        for name in self.env:
            references = ENV_REFERENCE.findall(self.env_template.get(name, ""))
            if is_secret_name(name) or any(is_secret_name(ref) for ref in references):
                secret.add(name)
        return secret

    def secret_values(self) -> list[str]:
        """Every secret value this launch holds (secret flags, secret variables): what no stored
        log line, message or attribute may show (see :class:`tuner.scrub.Scrubber`)."""
        values = [value for value in self.secret_flags.values() if isinstance(value, str)]
        values += [self.env[name] for name in sorted(self.secret_names())]
        return values

    def masked_env(self) -> dict[str, str]:
        """The environment with secret values replaced by ``***`` (what may be stored)."""
        secret = self.secret_names()
        return {name: MASK if name in secret else value for name, value in self.env.items()}

    def shell_exports(self) -> list[str]:
        """``export NAME=value`` lines for a bash script; secrets and references as
        ``${NAME:?}`` (the script stops if the variable is not set), never their values."""
        lines = []
        secret = self.secret_names()
        for name, value in self.env.items():
            template = self.env_template.get(name, value)
            if ENV_REFERENCE.search(template):
                expression = _double_quoted(template)
            elif name in secret:
                expression = f'"${{{name}:?}}"'
            else:
                expression = shlex.quote(value)
            lines.append(f"export {name}={expression}")
        return lines
