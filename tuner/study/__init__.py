"""The Optuna study, in rooms by question (each a package of private modules behind ``__all__``):

- :mod:`tuner.study.loop`: the run and the loop over trials (optimize, progress, the re-measure
  of a close best and runner-up, dry run, preflight, warm start, enqueue, validate, the host claim);
- :mod:`tuner.study.trial`: one trial (the runner, its outcome, the probe reference, the
  feasibility gate, the baseline pruner, goodput, traffic, the target host);
- :mod:`tuner.study.record`: what is stored on a trial and how it is read back (attribute keys,
  the one typed trial record and study view, results: the spread of a figure over runs, the
  winner beyond noise, the best at each load, energy per token);
- :mod:`tuner.study.storage`: where a study lives (file, SQL, journal), resume, stale workers;
- :mod:`tuner.study.strategies`: search strategies and the sampler factory.
"""
