"""A Bayesian additive model of the study's measurements: each parameter value's effect on the
log of the throughput, relative to the best configuration, pooled over every clean trial.

One trial measures a configuration with 2-5% of run noise, so a single one-change comparison
reads a 3% effect the wrong way round about one time in three. A value's effect is seen in many
trials (the first sweep, the second sweep from a newer best, the combinations): pooling them
reads it more surely, and the model's uncertainty says which effects are still open.

The model is Bayesian linear regression on one-hot features ("parameter = value" where the
value differs from the best's), with a Gaussian prior on each effect; :meth:`AdditiveFit.draw`
samples effects from the posterior (Thompson sampling), so an effect measured once with a wide
posterior is tried again while one measured often as a loss is not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["AdditiveFit", "fit_additive", "ABSENT"]

ABSENT = "<absent>"  # a parameter a configuration does not set (inactive there)


@dataclass(frozen=True)
class AdditiveFit:
    """The posterior of the effects: ``columns[i]`` = (parameter, value), effect ``mean[i]`` on
    the log throughput relative to the reference configuration (``intercept``: its log value)."""

    columns: tuple[tuple[str, Any], ...]
    mean: np.ndarray
    chol: np.ndarray  # Cholesky factor of the posterior covariance of (intercept, effects)
    intercept: float
    rows: int
    index: dict[tuple[str, Any], int]  # column -> its position in :meth:`draw`'s sample

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One sample of (intercept, every effect) from the posterior."""
        return self.mean + self.chol @ rng.standard_normal(len(self.mean))

    def changes(self, config: dict[str, Any], reference: dict[str, Any]) -> list[int] | None:
        """The effects (indices into :meth:`draw`'s sample) ``config`` has against ``reference``;
        None when it sets a value no fitted trial had (the model cannot say)."""
        found = []
        for column in _differences(config, reference):
            if column not in self.index:
                return None
            found.append(self.index[column])
        return found

    def upper(self, effects: list[int], z: float = 2.0) -> float:
        """The log-throughput gain of those effects ``z`` posterior standard deviations above its
        mean: below a loss, the model is that sure the change loses at least as much."""
        covariance = self.chol @ self.chol.T
        variance = float(covariance[np.ix_(effects, effects)].sum())
        return self.gain(effects) + z * max(0.0, variance) ** 0.5

    def gain(self, effects: list[int], sample: np.ndarray | None = None) -> float:
        """The log-throughput gain of those effects, by ``sample`` (default: the posterior mean)."""
        return float(sum((self.mean if sample is None else sample)[i] for i in effects))


def fit_additive(
    measured: Iterable[tuple[dict[str, Any], float]],
    reference: dict[str, Any],
    noise: float = 0.04,
    prior: float = 0.15,
) -> AdditiveFit | None:
    """Fit the effects of ``measured`` (configuration, throughput > 0) relative to ``reference``.

    ``noise``: the run-to-run noise of one trial (log scale, about 4%); ``prior``: the typical
    size of one effect (15%). None when there is nothing to fit."""
    rows = [(config, value) for config, value in measured if value and value > 0]
    if not rows:
        return None
    differences = [_differences(config, reference) for config, _ in rows]
    columns = list(dict.fromkeys(column for found in differences for column in found))
    index = {column: i + 1 for i, column in enumerate(columns)}
    x = np.zeros((len(rows), len(columns) + 1))
    x[:, 0] = 1.0
    for r, found in enumerate(differences):
        x[r, [index[column] for column in found]] = 1.0
    y = np.log([value for _, value in rows])
    center = float(np.max(y))
    # prior: the intercept is free (wide), each effect ~ N(0, prior^2); noise ~ N(0, noise^2)
    precision = x.T @ x / noise**2 + np.diag([1e-6] + [1.0 / prior**2] * len(columns))
    covariance = np.linalg.inv(precision)
    covariance = (covariance + covariance.T) / 2
    mean = covariance @ (x.T @ (y - center)) / noise**2
    mean[0] += center
    chol = np.linalg.cholesky(covariance + 1e-12 * np.eye(len(mean)))
    return AdditiveFit(tuple(columns), mean, chol, float(mean[0]), len(rows), index)


def _differences(config: dict[str, Any], reference: dict[str, Any]) -> list[tuple[str, Any]]:
    """The (parameter, value) pairs in which ``config`` differs from ``reference`` (ABSENT: not set)."""
    found = []
    for name in sorted(set(config) | set(reference)):
        value = _key(config.get(name, ABSENT))
        if value != _key(reference.get(name, ABSENT)):
            found.append((name, value))
    return found


def _key(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
