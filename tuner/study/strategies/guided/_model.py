"""The additive model's part in the ``guided`` strategy: the best the proposals start from, the
changes known to lose, and the changes it expects to pay.

The model (:mod:`tuner.study.strategies.additive`) is fitted to the clean trials within
``radius`` changes of the best and pools every measurement of each change. With 2-5% run
noise, one lucky figure would otherwise become the best every later change is compared with:
the proposals start from the clean trial near the highest measured one that the model expects
highest (:func:`modelled_best`). A change the model is sure loses at least ``known_loss`` is not
run again (:func:`known_loss`). A draw of its posterior picks up to ``changes`` changes of
the best it expects to pay (``model: 31 trials near the best, expects +3.2%: kv_cache_dtype=bf16,
radix_cache=False``; :class:`ModelProposer`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from tuner.errors import ConfigError
from tuner.study.strategies._moves import Change, Move, MoveKind
from tuner.study.strategies.additive import ABSENT, AdditiveFit, fit_additive
from tuner.study.strategies.guided._common import distance
from tuner.study.strategies.guided._proposer import Candidate, Proposer, Round
from tuner.study.strategies.guided._settings import ModelSettings
from tuner.study.record import StudyView, TrialRecord

__all__ = ["fit_near", "modelled_best", "known_loss", "ModelProposer"]


def fit_near(view: StudyView, inc: TrialRecord, settings: ModelSettings) -> AdditiveFit | None:
    """The additive model of the clean trials within ``settings.radius`` changes of ``inc``."""
    near = [
        (r.config, r.value)
        for r in view.complete()
        if r.value and distance(r.config, inc.config) <= settings.radius
    ]
    return fit_additive(near, inc.config)


def modelled_best(view: StudyView, measured: TrialRecord, settings: ModelSettings) -> TrialRecord:
    """The clean trial near the measured best whose value the additive model expects highest."""
    fit = fit_near(view, measured, settings)
    if fit is None or fit.rows < 3:
        return measured
    scored = []
    for record in view.complete():
        effects = fit.changes(record.config, measured.config) if record.value else None
        if effects is not None and distance(record.config, measured.config) <= settings.radius:
            scored.append((fit.gain(effects), -record.number, record))
    return max(scored, key=lambda item: item[:2])[2] if scored else measured


def known_loss(
    fit: AdditiveFit | None, config: Mapping[str, Any], inc: TrialRecord, settings: ModelSettings
) -> bool:
    """Whether the model, fitted near the best, is sure ``config`` loses at least ``settings.known_loss``
    against it (a backend that measured 0.3x of its parent is not run again from every new best)."""
    if not settings.known_loss or fit is None or fit.rows < 3:
        return False
    effects = fit.changes(dict(config), inc.config)
    return (
        effects is not None
        and bool(effects)
        and fit.upper(effects) < math.log1p(-settings.known_loss)
    )


class ModelProposer(Proposer):
    """Changes of the best that the model draws as gains: each draw of the posterior takes, per
    parameter, the change with the largest drawn gain, and keeps the ``changes`` largest
    (Thompson sampling). A change is scored with what it implies (a backend that drops its patch
    loses the patch's effect); one the model expects to lose (posterior mean) is not proposed."""

    def candidates(self, now: Round) -> Iterator[Candidate]:
        fit, inc, space, settings = (
            now.fit,
            now.incumbent,
            self.plan.space,
            self.plan.settings.model,
        )
        if fit is None or fit.rows < 3:
            return
        singles: list[tuple[str, Any, list[int]]] = []
        for name, value in fit.columns:
            if value == ABSENT:
                continue
            try:
                config = dict(space.config({**inc.config, name: value}, drop_inactive=True))
            except ConfigError:
                continue
            effects = fit.changes(config, inc.config)
            if effects:
                singles.append((name, value, effects))
        rng = np.random.default_rng([self.plan.seed or 0, len(now.view.records)])
        for _ in range(settings.draws):
            sample = fit.draw(rng)
            best: dict[str, tuple[float, Any]] = {}
            for name, value, effects in singles:
                gain = fit.gain(effects, sample)
                if gain > best.get(name, (0.0, None))[0]:
                    best[name] = (gain, value)
            picked = sorted(best.items(), key=lambda item: -item[1][0])[: settings.changes]
            if not picked:
                continue
            values = {**inc.config, **{name: value for name, (_, value) in picked}}
            try:
                effects = fit.changes(dict(space.config(values, drop_inactive=True)), inc.config)
            except ConfigError:
                continue
            if not effects or fit.gain(effects, sample) <= 0 or fit.gain(effects) < 0.0:
                continue
            changes = tuple(
                Change(name, value, inc.config.get(name)) for name, (_, value) in picked
            )
            detail = (
                f"{fit.rows} trials near the best, expects {math.expm1(fit.gain(effects)):+.1%}"
            )
            yield Candidate(values, Move(MoveKind.MODEL, changes, detail=detail))
