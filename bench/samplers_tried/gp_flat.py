"""Experiment: Optuna's GPSampler on a flat space.

GPSampler needs PyTorch (the project does not install it; point ``TUNER_TORCH_SITE`` at a
site-packages that has it, e.g. the vLLM venv's) and a fixed search space, so every parameter and
every number is suggested on every trial (inactive ones are then dropped from the configuration).
Importing this module replaces ``SearchSpace.suggest`` for the process: experiment only.
"""
import os
import sys

import optuna

from tuner.space import SET_SUFFIX, SearchSpace

if os.environ.get("TUNER_TORCH_SITE"):
    sys.path.append(os.environ["TUNER_TORCH_SITE"])


def flat_suggest(self, trial):
    values = {}
    for name, param in self.model.parameters.items():
        if hasattr(param, "low") and getattr(param, "unset", False):
            is_set = trial.suggest_categorical(name + SET_SUFFIX, [True, False])
            number = param._sample(trial, name)
            values[name] = number if is_set else None
        else:
            values[name] = param.suggest(trial, name)
    return self.config(values, drop_inactive=True)


SearchSpace.suggest = flat_suggest


def gp6(seed):
    return optuna.samplers.GPSampler(seed=seed, n_startup_trials=6, warn_independent_sampling=False)


def tpe_flat(seed):
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=6, constant_liar=True)
