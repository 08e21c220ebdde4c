"""What a server's own log says about why it is as fast as it is, as numbers.

A person tuning by hand reads these lines; the ``guided`` strategy's rules read the numbers
(stored on the trial as ``observations``, see :mod:`tuner.study.attrs`):

- ``kv_tokens``: the KV pool at start (SGLang ``KV Cache is allocated. #tokens: N``; vLLM
  ``GPU KV cache size: N tokens``);
- ``max_running_requests``: the cap the server runs with (SGLang ``max_running_requests=N``;
  vLLM ``max_num_seqs=N``);
- ``running_req_max``, ``running_req_at_cap_fraction``: the largest running batch, and the
  share of the batch lines where it sat at the cap (SGLang ``Decode batch, #running-req: N``;
  vLLM ``Running: N reqs``);
- ``token_usage_max``: the highest KV-pool usage (0-1);
- ``queue_growing``: 1 when requests waited in most batch lines (``#queue-req``/``Waiting``).
"""

from __future__ import annotations

import re

__all__ = ["observe"]

_KV = (re.compile(r"KV Cache is allocated\. #tokens: (\d+)"), re.compile(r"KV cache size: ([\d,]+) tokens"))
_CAP = (re.compile(r"max_running_requests=(\d+)"), re.compile(r"max_num_seqs=(\d+)"))
_BATCH = (
    re.compile(r"Decode batch, #running-req: (\d+), .*?token usage: ([\d.]+).*?#queue-req: (\d+)"),
    re.compile(r"Running: (\d+) reqs, .*?Waiting: (\d+) reqs, .*?KV cache usage: ([\d.]+)%"),
)


def observe(log: str) -> dict[str, float]:
    """The observations found in one server log (names absent when the log does not say)."""
    found: dict[str, float] = {}
    for pattern in _KV:
        if match := pattern.search(log):
            found["kv_tokens"] = float(match.group(1).replace(",", ""))
    for pattern in _CAP:
        if match := pattern.search(log):
            found["max_running_requests"] = float(match.group(1))
    batches: list[tuple[int, float, int]] = []  # (running, usage 0-1, waiting)
    for match in _BATCH[0].finditer(log):
        batches.append((int(match.group(1)), float(match.group(2)), int(match.group(3))))
    for match in _BATCH[1].finditer(log):
        batches.append((int(match.group(1)), float(match.group(3)) / 100.0, int(match.group(2))))
    batches = [b for b in batches if b[0] > 0]
    if batches:
        found["running_req_max"] = float(max(b[0] for b in batches))
        found["token_usage_max"] = max(b[1] for b in batches)
        found["queue_growing"] = 1.0 if sum(b[2] > 0 for b in batches) * 2 > len(batches) else 0.0
        cap = found.get("max_running_requests")
        if cap:
            found["running_req_at_cap_fraction"] = round(
                sum(b[0] >= cap for b in batches) / len(batches), 3
            )
    return found
