"""Every fix an error message spells out as YAML is one the loader then accepts.

Each case breaks glm5.yaml the way a user might, checks that the message suggests the snippet,
applies the snippet as written, and loads the file. A last test scans the tuner's messages for
backticked YAML snippets, so that a new suggestion without a case here fails.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.space import GLM5, REPO
from tuner.errors import ConfigError
from tuner.space import load_space

Doc = dict[str, Any]


def params(document: Doc) -> Doc:
    return document["parameters"]


def without(mapping: Doc, key: str) -> Doc:
    mapping.pop(key)
    return mapping


# (suggested snippet, how a user breaks the file, the fix as the message words it)
CASES: list[tuple[str, Callable[[Doc], Any], Callable[[Doc], Any]]] = [
    ("when: {moe_runner_backend: flashinfer_cutlass}",
     lambda d: params(d)["autotune_gate"].update(when={}),
     lambda d: params(d)["autotune_gate"].update(
         yaml.safe_load("when: {moe_runner_backend: flashinfer_cutlass}"))),
    ("flag: --name",
     lambda d: without(params(d)["attention_backend"], "flag"),
     lambda d: params(d)["attention_backend"].update(flag="--attention-backend")),
    ("env: NAME",
     lambda d: without(params(d)["attention_backend"], "flag"),
     lambda d: params(d)["attention_backend"].update(env="SGLANG_ATTENTION_BACKEND")),
    ("unset: true",  # a baseline value of null where the parameter cannot be unset
     lambda d: d["baseline"].update(attention_backend=None),
     lambda d: params(d)["attention_backend"].update(yaml.safe_load("unset: true"))),
    ("unset: true",  # null listed among the choices
     lambda d: params(d)["attention_backend"]["choices"].append(None),
     lambda d: (params(d)["attention_backend"]["choices"].remove(None),
                params(d)["attention_backend"].update(yaml.safe_load("unset: true")))),
    ("requests_per_level: 512",
     lambda d: d["workload"].update(requests_per_level={"min": 128}),
     lambda d: d["workload"].update(yaml.safe_load("requests_per_level: 512"))),
    ("{per_concurrency: 2, min: 128}",
     lambda d: d["workload"].update(requests_per_level={"min": 128}),
     lambda d: d["workload"].update(
         requests_per_level=yaml.safe_load("{per_concurrency: 2, min: 128}"))),
    ("{flag: --speculative-config, json_key: method}",  # a JSON key that is not a name
     lambda d: params(d)["attention_backend"].update(json_key="a-b"),
     lambda d: params(d)["attention_backend"].update(
         yaml.safe_load("{flag: --speculative-config, json_key: method}"))),
    ("kind:",
     lambda d: without(params(d)["attention_backend"], "kind"),
     lambda d: params(d)["attention_backend"].update(kind="categorical")),
    ("dataset: data/sharegpt.json",  # a file dataset without its path
     lambda d: d["workload"].update(dataset={"sample": 100}),
     lambda d: d["workload"].update(yaml.safe_load("dataset: data/sharegpt.json"))),
    ("dataset: {kind: random}",
     lambda d: d["workload"].update(dataset={"sample": 100}),
     lambda d: d["workload"].update(yaml.safe_load("dataset: {kind: random}"))),
    ("kind: file",  # a path given to a generated dataset
     lambda d: d["workload"].update(dataset={"kind": "random", "path": "data/sharegpt.json"}),
     lambda d: d["workload"]["dataset"].update(yaml.safe_load("kind: file"))),
    ("key: value",  # a section given as a list
     lambda d: d.update(timeouts=[600]),
     lambda d: d.update(yaml.safe_load("timeouts: {start_s: 600}"))),
]


def load(tmp_path: Path, document: Doc) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    load_space(path)


@pytest.mark.parametrize(("snippet", "breaks", "fixes"), CASES,
                         ids=[f"{i}:{case[0]}" for i, case in enumerate(CASES)])
def test_the_suggested_fix_is_accepted(tmp_path: Path, snippet: str,
                                       breaks: Callable[[Doc], Any],
                                       fixes: Callable[[Doc], Any]) -> None:
    document = yaml.safe_load(GLM5.read_text())
    load(tmp_path, copy.deepcopy(document))
    breaks(document)
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, document)
    assert f"`{snippet}`" in str(refused.value), str(refused.value)
    fixes(document)
    load(tmp_path, document)


def yaml_snippets_in_messages() -> set[str]:
    """Backticked ``key: value`` or ``{...}`` snippets in the tuner's string literals (not
    docstrings)."""
    found = set()
    for path in sorted((REPO / "tuner").rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                                    | ast.AsyncFunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docstrings):
                for snippet in re.findall(r"(?<!`)`([^`]+)`(?!`)", node.value):
                    if re.match(r"^(\{|[a-z_]+:)", snippet):
                        found.add(snippet)
    return found


def test_every_yaml_snippet_a_message_suggests_has_a_case() -> None:
    assert yaml_snippets_in_messages() == {snippet for snippet, _, _ in CASES}
