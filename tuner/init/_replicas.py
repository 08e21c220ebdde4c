"""Data parallelism as engine replicas, for SGLang (``--dp-size`` without DP attention) and vLLM
(``--data-parallel-size``): N copies of the model, each on its own tp x pp GPUs, the requests
spread over them, so one replica takes tp x pp GPUs and the server tp x pp x dp.

The sizes offered are those where tp x pp x dp divides the host's GPUs for some tp that holds
the weights (on 8 GPUs: 2, 4, 8), the even splits of the host, as the tensor-parallel sizes
are; a size in between (3 replicas of 2 GPUs on 8) leaves GPUs idle that one more even split
would use, and only lengthens the search. The ``skip`` constraints refuse only what cannot run:
a pair that needs more GPUs than the host has, or a tp whose GPUs cannot hold the weights. A
command's own layout that leaves GPUs idle (tp 2 x dp 3 on 8) is kept, as its baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.init._context import LeverContext, memory
from tuner.init._plan import Constraint, Param, baseline_value

__all__ = ["ReplicaFlags", "data_parallel"]


@dataclass(frozen=True)
class ReplicaFlags:
    """An engine's names for the layout: the tp and dp parameters and flags, and its pp flag."""

    tp: str  # the tensor-parallel parameter's name
    tp_flag: str
    dp: str  # the data-parallel parameter's name
    dp_flag: str
    pp_flag: str


def _weights(lv: LeverContext) -> str:
    model = lv.model
    if model and model.weights_gb:
        return f"the {model.weights_gb:g} GB of weights ({memory(lv)} a GPU)"
    return "the weights"


def data_parallel(lv: LeverContext, names: ReplicaFlags, what: str) -> Param | None:
    """Add the data-parallel size (``what``: what a replica is, for its comment) and the
    constraints that skip the (tp, dp) pairs that cannot run; or leave it out, saying why.

    The tp sizes a replica can have are the searched ones (unset = 1), else the command's own,
    each where it holds the weights."""
    plan, gpus = lv.plan, lv.gpus
    label = f"{names.dp_flag} (engine replicas)"
    if gpus < 2:
        plan.left_out.append(f"{label}: fewer than 2 GPUs")
        return None
    pp = baseline_value(lv.command, {"kind": "int", "flag": names.pp_flag}) or 1
    fixed = baseline_value(lv.command, {"kind": "int", "flag": names.tp_flag}) or 1
    tp = next((p for p in plan.params if p.name == names.tp), None)
    candidates = [t or 1 for t in [None, *tp.spec["choices"]]] if tp else [fixed]
    tps = sorted({t for t in candidates if lv.unfit(t) is None})
    sizes = [d for d in range(2, gpus + 1) if any(gpus % (t * pp * d) == 0 for t in tps)]
    if not sizes:
        plan.left_out.append(f"{label}: {_no_room(lv, tps, pp)}")
        return None
    per = "tp x pp x dp" if pp > 1 else "tp x dp"
    dp = lv.param(
        names.dp,
        {"kind": "categorical", "flag": names.dp_flag, "choices": sizes},
        f"{what}; sizes where {per} divides the {gpus} GPUs with a tp that holds "
        f"{_weights(lv)}; unset = 1",
    )
    plan.add(dp)
    if dp is not None and tp is not None:
        plan.constraints.extend(_skips(lv, tp, dp, pp))
    return dp


def _no_room(lv: LeverContext, tps: list[int], pp: int) -> str:
    """Why no data-parallel size is offered, for the file's comments."""
    if not tps:
        return f"no tp size holds {_weights(lv)}"
    smallest = min(tps)
    if 2 * smallest * pp <= lv.gpus:  # room for two, but no even split (pp 3 on 8 GPUs)
        return f"no size with tp x pp {pp} x dp dividing the {lv.gpus} GPUs"
    with_pp = f", with pp {pp}" if pp > 1 else ""
    return (
        f"the smallest tp that holds {_weights(lv)} is {smallest}{with_pp}: one replica "
        f"takes {smallest * pp} of the {lv.gpus} GPUs, no room for a second"
    )


def _skips(lv: LeverContext, tp: Param, dp: Param, pp: int) -> list[Constraint]:
    """One ``skip`` per tp choice: the dp sizes it cannot run with (more GPUs than the host
    has), or every dp size where that tp cannot hold the weights."""
    found = []
    dps = dp.spec["choices"]
    pp_text = f" x pp {pp}" if pp > 1 else ""
    for size in [None, *tp.spec["choices"]]:
        gpus = (size or 1) * pp
        unfit = lv.unfit(size or 1)
        bad = dps if unfit else [d for d in dps if gpus * d > lv.gpus]
        if not bad:
            continue
        reason = (
            f"a replica of tp {size or 1}{pp_text} cannot hold the model: {unfit}"
            if unfit
            else f"tp {size or 1}{pp_text} x dp {' or '.join(map(str, bad))} = "
            f"{' or '.join(str(gpus * d) for d in bad)} GPUs, more than the host's {lv.gpus}"
        )
        found.append(
            Constraint({tp.name: size, dp.name: bad[0] if len(bad) == 1 else bad}, "skip", reason)
        )
    return found
