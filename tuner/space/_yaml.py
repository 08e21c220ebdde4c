"""Reading the search-space YAML: syntax errors with line and column, duplicate keys refused.

PyYAML silently keeps the last of two equal keys, which would hide a parameter written twice; the
document is therefore first composed into nodes, checked for duplicates, and only then built.
The nodes are kept so that a field path can be turned into the line the user has to edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tuner.errors import ConfigError
from tuner.space._problems import FieldPath, dotted, problem_message

__all__ = ["YamlDocument", "read_yaml"]


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML file and the node tree it came from (for line numbers)."""

    file: str
    data: Any
    root: yaml.Node | None

    def line_of(self, path: FieldPath) -> int | None:
        """The 1-based line of the deepest node along ``path`` that exists in the file."""
        node, line = self.root, None
        for part in path:
            if node is None:
                break
            line = node.start_mark.line + 1
            node = _child(node, part)
        if node is not None:
            line = node.start_mark.line + 1
        return line


def _child(node: yaml.Node, part: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                return value_node
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        return node.value[part]
    return None


def _check_duplicates(file: str, node: yaml.Node, path: FieldPath) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key in seen:
                raise ConfigError(
                    problem_message(
                        file,
                        key_node.start_mark.line + 1,
                        (*path, key),
                        f"{key!r} is given twice (YAML would silently keep the last one)",
                        f"keep one `{key}:` under {dotted(path) or 'the top level'}",
                    )
                )
            if key is not None:
                seen.add(key)
            _check_duplicates(file, value_node, (*path, key if key is not None else "?"))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_duplicates(file, item, (*path, index))


def read_yaml(path: Path, shown_as: str) -> YamlDocument:
    """Read and parse ``path``; every problem is a one-line :class:`ConfigError`.

    Args:
        path: the file to read.
        shown_as: how the file is named in messages (as the user gave it).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{shown_as}: file not found; fix: give the path of a search-space "
            "YAML, e.g. search_spaces/glm5.yaml"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"{shown_as}: cannot read the file ({error}); fix: give a readable UTF-8 YAML file"
        ) from None
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is not None:
            _check_duplicates(shown_as, root, ())
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{shown_as}:{mark.line + 1}:{mark.column + 1}" if mark else shown_as
        problem = " ".join(str(error.problem or error.context or "invalid YAML").split())
        raise ConfigError(
            f"{where}: YAML syntax error: {problem}; fix: correct the YAML at "
            "that line (indentation, a missing colon or quote)"
        ) from None
    except yaml.YAMLError as error:
        raise ConfigError(
            f"{shown_as}: YAML error: {' '.join(str(error).split())}; fix: correct the YAML"
        ) from None
    finally:
        loader.dispose()
    return YamlDocument(shown_as, data, root)
