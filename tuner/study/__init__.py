"""The Optuna study: storage and resume, the baseline pruner, one trial, the optimize loop, results.

Import from the submodules (``tuner.study.run``, ``tuner.study.results``, ...).
"""
