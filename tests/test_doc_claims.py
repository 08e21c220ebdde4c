"""The docs and the shipped search spaces say what the code does.

A cheap grep for claims the code can contradict: the address the server binds by default
(``SearchSpace.bind_address`` without ``server.bind``) and the default strategy
(``DEFAULT_STRATEGY``). Each document is read as sentences (YAML comments included, lines
joined); a sentence that says "default" about the bind address, or names a strategy as the
default, must name the code's. Add a file to :data:`DOCUMENTS` to hold it to the same claims.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.space import GLM5
from tuner.space import load_space
from tuner.study.strategies import DEFAULT_STRATEGY, STRATEGIES

REPO = Path(__file__).resolve().parents[1]
# docs/history.md is what earlier code measured (it may say what each day's default was): not a
# claim about today's code. docs/measurements.md states today's figures and is held to the claims.
HISTORY = REPO / "docs" / "history.md"
DOCUMENTS = sorted(
    [*(p for p in (REPO / "docs").glob("*.md") if p != HISTORY),
     *(REPO / "search_spaces").glob("*.yaml"), REPO / "tuner" / "emulator" / "README.md",
     REPO / "README.md"]
)
_ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
_BIND = re.compile(r"\bbind|--host\b", re.IGNORECASE)
_NAMES = "|".join(re.escape(name) for name in STRATEGIES)
# "TPE by default", "`tpe` is the default", "default strategy: tpe", "(default: tpe)"
_STRATEGY_CLAIMS = [
    re.compile(rf"`?\b({_NAMES})\b`?\s*(?:\([^)]*\)\s*)?(?:by default|is the default)", re.I),
    re.compile(rf"\bdefault(?: strategy)?\s*(?:is|:)\s*`?\b({_NAMES})\b", re.I),
    re.compile(rf"\(default[:,]?\s*`?({_NAMES})\b", re.I),
]


@dataclass(frozen=True)
class Sentence:
    """One sentence of a document, and the one before it (for what it is about)."""

    path: Path
    text: str
    before: str

    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}: {self.text[:160]!r}"


def sentences(path: Path) -> list[Sentence]:
    """The document's sentences: lines joined (YAML comment marks dropped), split after '. '."""
    lines = path.read_text().splitlines()
    if path.suffix == ".yaml":
        lines = [line.split("#", 1)[1] if "#" in line else line for line in lines]
    text = re.sub(r"\s+", " ", " ".join(lines))
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", text)
    return [Sentence(path, part, parts[index - 1] if index else "")
            for index, part in enumerate(parts)]


def bind_default_claims(sentence: Sentence, default: str) -> list[str]:
    """Addresses a sentence gives as the bind default that are not ``default``."""
    if not re.search(r"\bdefault", sentence.text, re.I):
        return []
    if not _BIND.search(sentence.text) and not _BIND.search(sentence.before):
        return []
    return [address for address in _ADDRESS.findall(sentence.text) if address != default]


def strategy_claims(sentence: Sentence) -> list[str]:
    """Strategies a sentence names as the default."""
    return [match.group(1).lower() for pattern in _STRATEGY_CLAIMS
            for match in pattern.finditer(sentence.text)]


@pytest.fixture(scope="module")
def bind_default() -> str:
    return load_space(GLM5).bind_address(local=False)  # glm5.yaml sets no server.bind


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO)))
def test_no_document_contradicts_the_code(path: Path, bind_default: str) -> None:
    wrong = []
    for sentence in sentences(path):
        for address in bind_default_claims(sentence, bind_default):
            wrong.append(f"{sentence.where()}: bind default {address}, the code binds {bind_default}")
        for name in strategy_claims(sentence):
            if name != DEFAULT_STRATEGY:
                wrong.append(f"{sentence.where()}: default strategy {name}, the code's is "
                             f"{DEFAULT_STRATEGY}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("text", "bind", "strategy"), [
    ("The configuration is chosen by the strategy (TPE by default): it reads.", [], ["tpe"]),
    ("`bind` defaults to `127.0.0.1` when local and to `0.0.0.0` on a remote host.", ["0.0.0.0"], []),
    ("The server's --host. Default: 0.0.0.0 on a remote host, 127.0.0.1 when local.", ["0.0.0.0"], []),
    ("The server binds `127.0.0.1` by default, on a remote host too.", [], []),
    ("`server.bind: 0.0.0.0` is still honoured when you ask for it.", [], []),
    ("`--strategy`: `guided` (default: log rules), `tpe`, `random`.", [], []),
    ("The default strategy is random.", [], ["random"]),
])
def test_the_grep_finds_the_claims_it_is_for(text: str, bind: list[str], strategy: list[str]) -> None:
    sentence = Sentence(REPO / "README.md", text, "")
    assert bind_default_claims(sentence, "127.0.0.1") == bind
    assert strategy_claims(sentence) == strategy


def test_the_readme_is_a_user_guide_of_at_most_300_lines() -> None:
    """The README is what a user reads first; the figures and their commands live in
    docs/measurements.md, which the README links."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert "docs/measurements.md" in readme
