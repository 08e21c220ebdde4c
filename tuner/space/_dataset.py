"""``workload.dataset``: the user's own traffic.

``dataset`` is a file (``{path: data/chats.jsonl}``, or just the path: ShareGPT JSON or JSONL,
told apart by content), ``random`` lengths with a ``range_ratio``, or ``shared_prefix`` groups.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from tuner.space._problems import FieldProblem
from tuner.space._strict import StrictModel

__all__ = ["DatasetConfig"]


class DatasetConfig(StrictModel):
    """Where a trial's requests come from, instead of fixed-length random tokens."""

    kind: Literal["file", "random", "shared_prefix"] = "file"
    path: str | None = None
    # file: how many requests are kept from the file (a uniform sample, read once per study),
    # the cap on each output length, and an output length that replaces the file's.
    sample: int = Field(default=2000, gt=0)
    max_output_len: int = Field(default=2048, gt=0)
    output_len: int | None = Field(default=None, gt=0)
    # random: lengths drawn from [max(1, int(L*range_ratio)), L] (L: input_len, output_len).
    range_ratio: float = Field(default=1.0, gt=0, le=1)
    # shared_prefix: groups of requests sharing a prefix; suffix_len defaults to input_len.
    groups: int = Field(default=8, gt=0)
    prefix_len: int = Field(default=1024, gt=0)
    suffix_len: int | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"kind": data} if data in ("random", "shared_prefix") else {"path": data}
        return data

    @model_validator(mode="after")
    def _path_for_files(self) -> DatasetConfig:
        if self.kind == "file" and not self.path:
            raise FieldProblem(
                "a file dataset needs a path",
                "write `dataset: data/sharegpt.json` or `dataset: {kind: random}`",
            )
        if self.kind != "file" and self.path:
            raise FieldProblem(
                f"a {self.kind} dataset takes no path",
                "remove `path`, or use `kind: file`",
                at=("path",),
            )
        return self
