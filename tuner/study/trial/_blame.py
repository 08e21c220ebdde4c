"""Which of a failed trial's values caused the failure, for the "keeps failing" report.

A failed trial holds a value of every dimension, and only some of them broke it. A failure is
put down to a value only when the evidence supports it:

1. its detail names the dimension or the value (``ValueError: flashinfer_mxfp4 MoE runner
   requires mxfp4 quantization`` names ``moe_runner_backend=flashinfer_mxfp4``): those only;
2. otherwise the trial's values that fail most often across the study, by a smoothed share
   ``(failed + 1) / (ran + 2)`` (a value seen once cannot outweigh one that failed 4 of 4):
   ``cuda_graph=false`` in a trial with a backend that always refuses to start is explained by
   the backend, not counted against CUDA graphs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Failure", "blamed_values", "shown"]

# (config as {name: value}, failure detail or "") of one trial failed by its configuration
Failure = tuple[Mapping[str, Any], str]


def shown(value: Any) -> str:
    """A value as the report writes it (``unset`` for None, ``true``/``false``)."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _named(detail: str, name: str, value: Any) -> bool:
    text = detail.lower()
    if name.lower() in text or name.lower().replace("_", "-") in text:
        return True
    if isinstance(value, str) and not isinstance(value, bool) and len(value) >= 3:
        return re.search(rf"(?<![\w-]){re.escape(value.lower())}(?![\w-])", text) is not None
    return False


def blamed_values(
    ran: Counter[tuple[str, str]], failures: Iterable[Failure]
) -> list[set[tuple[str, str]]]:
    """For each failure, the ``(name, shown value)`` pairs it is put down to.

    Args:
        ran: how many trials that ran (failed or not) had each value.
        failures: the failed trials' configurations and details.
    """
    failures = list(failures)
    failed: Counter[tuple[str, str]] = Counter()
    for config, _ in failures:
        failed.update((name, shown(value)) for name, value in config.items())
    share = {key: (failed[key] + 1) / (ran[key] + 2) for key in failed}
    blamed = []
    for config, detail in failures:
        keys = {(name, shown(value)) for name, value in config.items()}
        named = {
            (name, shown(value))
            for name, value in config.items()
            if detail and _named(detail, name, value)
        }
        if named:
            blamed.append(named)
            continue
        top = max((share[key] for key in keys), default=0.0)
        blamed.append({key for key in keys if share[key] >= top - 1e-9})
    return blamed
