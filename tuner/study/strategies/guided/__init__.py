"""``guided``: search the way a person tunes by hand, with TPE for what is left.

Each proposal starts from the best configuration so far (the incumbent; the baseline at first;
the clean trial near the highest measured one that the additive model expects highest) and
changes what the trials say binds. The strategy is a composition: an ordered list of proposers
(:class:`GuidedSettings`'s ``proposers``, :class:`ProposerKind`), each one module with its typed
parameters, asked in this order by the coordinator (:mod:`._strategy`), which runs the first
candidate that passes its checks. The default order:

1. **rules** (:mod:`._rules`): the engine profile's ``tuning_rules`` (data, in
   ``tuner/engines/<engine>.yaml``), then the built-in rules (small classes): an observation of
   the incumbent's trial moves one flag one step; a rule's change that ran out of memory under
   load is **repaired** with less memory (:mod:`._cliff`); a capacity change that lost alone is
   **retried** from a best lifted since (:mod:`._capacity`);
2. **the memory cliff** (:mod:`._cliff`): an ``up_to_failure`` parameter's bracket, bisected
   while the best's KV pool is full;
3. **the sweep** (:mod:`._sweep`): each other parameter's values, one change at a time;
4. **the additive model** (:mod:`._model`) and **combinations** of the one-changes that paid
   (:mod:`._combine`), then a second sweep from the best;
5. the fallback, when no proposer has a candidate left: the sampler draws, TPE that learns from
   crashes (:mod:`tuner.study.strategies.tpe`).

Every proposal is a typed :class:`tuner.study.strategies._moves.Move`, stored on its trial; the
strategy reads past moves from their fields (never from the reason text). It reads only what a
trial on a real host records (levels, failure class, observations).
"""

from __future__ import annotations

from tuner.study.strategies.guided._capacity import expected_effect
from tuner.study.strategies.guided._cliff import CliffBracket, CliffProposer, cliff_bracket
from tuner.study.strategies.guided._common import pool_full, top_level_observations
from tuner.study.strategies.guided._proposer import Candidate, Plan, Proposer, Round
from tuner.study.strategies.guided._rules import (
    BUILT_IN_RULES,
    ProfileRule,
    Reading,
    Rule,
    RuleProposer,
    rule_id,
)
from tuner.study.strategies.guided._settings import (
    DEFAULT_PROPOSERS,
    GuidedSettings,
    ModelSettings,
    ProposerKind,
    SweepSettings,
)
from tuner.study.strategies.guided._strategy import GuidedStrategy
from tuner.study.strategies.guided._sweep import SweepProposer, SweptParameter

__all__ = [
    "GuidedStrategy",
    "GuidedSettings",
    "SweepSettings",
    "ModelSettings",
    "ProposerKind",
    "DEFAULT_PROPOSERS",
    "Rule",
    "Reading",
    "RuleProposer",
    "ProfileRule",
    "BUILT_IN_RULES",
    "rule_id",
    "Proposer",
    "Candidate",
    "Plan",
    "Round",
    "CliffBracket",
    "CliffProposer",
    "SweepProposer",
    "SweptParameter",
    "cliff_bracket",
    "expected_effect",
    "pool_full",
    "top_level_observations",
]
