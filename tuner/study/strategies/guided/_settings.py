"""The knobs of the ``guided`` strategy, chosen on generated landscapes 0-49 (``bench/``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GuidedSettings"]


@dataclass(frozen=True)
class GuidedSettings:
    """Knobs of the guided strategy (chosen on generated landscapes 0-49, bench/)."""

    explore_every: int = 0  # every k-th host-run trial is the sampler's (0: only when idle)
    sweep_points: int = 5  # values tried over a numeric range in the sweep
    # a change tried when the best measured was below 1/retry_gain of today's best is stale (the
    # context moved on: a backend that paid since): it may be tried again from the new best
    retry_gain: float = 1.15
    sweep_again: int = 1  # 1: a second sweep from the best once the first is done (0: the sampler)
    # where the additive model's proposals come (tuner.study.strategies.additive): "off", "idle"
    # (when nothing else is left), "before-sweep-again", "before-combine" (after the first
    # sweep), "eager" (also during the sweep, when it expects at least model_eager_gain)
    model: str = "before-combine"
    model_eager_gain: float = 0.02  # "eager": the least gain the model must expect (posterior mean)
    model_draws: int = 40  # posterior draws a proposal is chosen from
    model_changes: int = 3  # changes of the best one model proposal makes at most
    model_radius: int = 4  # trials fitted: those within this many changes of the best
    # the order of the sweep's parameters: "effect" (by the gain expected of each: a capacity
    # flag of the engine profile while its limit may bind, its prior; a parameter with a value that
    # comes with a source patch, patch_effect; the rest default_effect; ties: fewest values), "cheap" (values that come with a source patch, in the
    # space's order; then the memory trades when the best's KV pool is full; then the fewest
    # values first: more parameters measured for the trials spent), "space" (as the YAML lists
    # them), "fewest" (a source patch first, then the fewest values)
    # "per-trial": "effect" over the trials a parameter takes (its count of values; one for a
    # parameter with a patched value, tried first): the most expected gain for each trial spent
    sweep_order: str = "per-trial"
    trials_at_most: int = 3  # "per-trial": a parameter counts at most this many trials (a hump's first three)
    patch_effect: float = 0.3  # "effect": the gain expected of a value someone wrote a patch for
    default_effect: float = 0.05  # "effect": of any other parameter (issue 28: each a few percent)
    # 1: a shaped parameter no rule moved is swept too (a cap at the top concurrency and halved, a
    # cliff's bracket), after its expected effect; 0: skipped (the setting of before)
    sweep_shaped: int = 1
    # 1: a capacity change that lost alone is tried again from a best lifted since, while the
    # best's levels say a limit binds (0: off)
    capacity_retry: int = 1
    # the engine profile's ``sweep_late`` flags (CUDA graphs off, fewer captured batches: memory
    # for speed) in the sweep: 1: after every other parameter unless the best's KV pool is full
    # (token usage >= 90% at its top level: then memory is the reason to try them); 2: after
    # every other parameter always; 0: in the space's order
    sweep_late: int = 1
    # 1: the engine profile's ``sweep_last`` flags (speculation, an all-to-all backend: a gain at
    # another load or on another host) after every other parameter; 0: by expected effect
    sweep_last: int = 1
    # 1: a rule that raised the ``up_to_failure`` parameter itself and ran out of memory under
    # load is not repaired (the cliff's bracket takes that failure); 0: repaired like the others
    repair_own: int = 1
    # "full": an ``up_to_failure`` parameter's cliff is probed only while the best's KV pool is
    # full (token usage >= 90% at its top level: more memory can pay), and where nothing reports
    # the pool's use; "said-full": only while the log or /metrics says it is full (elsewhere the
    # memory waits for its place in the sweep: held out 2026-12-06, emulator none 10 -> 6 trials,
    # generated none 24 -> 25.5, within 40 71 -> 61 of 100, so not the default); "always": from
    # the start
    cliff: str = "full"
    # a change the additive model is sure (two standard deviations) loses at least this share,
    # pooled over what was measured near the best, is not run again from a new best (0: off)
    known_loss: float = 0.05
    # the best the proposals start from: the highest "measured" value, or the highest value the
    # additive "model" expects among the clean trials near it (one lucky measurement does not
    # become the best that every later change is compared with)
    incumbent: str = "model"
    # a parameter whose values measured in the sweep all lost at least this share against the
    # best waits for the end of the sweep (its other values are likely losses too: a backend
    # after another backend measured 0.5x); numbers lie on a curve and keep their place (0: off)
    defer_loss: float = 0.1
    # the value a rule lowers a ``saturating`` cap to: half the running batch on the cap's
    # "doubling" values (the same value from every best), or exactly "half" of it (the setting of before)
    lower_to: str = "doubling"
    # 1: a rule's ``lower_to_at_most`` holds (a cap lowered to get back under the CUDA graphs is
    # not proposed above the largest batch they capture); 0: ignored (the setting of before)
    lower_within: int = 1
    # 1: the memory cliff moves the best back up to the highest value that held once per value
    # (a best that went below it since measured as fast there); 0: from every best
    cliff_back_once: int = 1
    # 1: a shaped ``up_to_failure`` parameter the sweep explores (no log on its pool) goes one
    # step below the best once a study, not from every best (a walk down a flat curve); 0: every best
    below_once: int = 1
    # 1: the first sweep does not set a parameter back to the value the best left for a measured
    # gain (the change measured both ways already; the second sweep may); 0: it does
    keep_gains: int = 1
    # a parameter the best's line moved for a measured gain of at least this share (the patched
    # MoE backend at +40%) waits with its other values for the end of the first sweep: the value
    # that won is the likely best of them, the other parameters are still unmeasured (0: off)
    defer_won: float = 0.15
