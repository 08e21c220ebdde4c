"""Experiment: TPE (make_sampler) for global steps, alternating with additive-TS steps near the best."""
import search_efficiency as se
from optuna.samplers import BaseSampler
from tuner.space import load_space
from tuner.study.strategies import make_sampler
from additive_ts import AdditiveTS

class Hybrid(BaseSampler):
    def __init__(self, space, seed, every=2, start=8, radius=2, **kw):
        self.tpe = make_sampler("tpe", seed); self.local = AdditiveTS(space, seed=seed, radius=radius, **kw)
        self.every, self.start = every, start
    def _local(self, study, trial):
        return trial.number >= self.start and trial.number % self.every == 0
    def infer_relative_search_space(self, study, trial):
        return {} if self._local(study, trial) else self.tpe.infer_relative_search_space(study, trial)
    def sample_relative(self, study, trial, space):
        return {} if self._local(study, trial) else self.tpe.sample_relative(study, trial, space)
    def sample_independent(self, study, trial, name, dist):
        if self._local(study, trial): return self.local.sample_independent(study, trial, name, dist)
        return self.tpe.sample_independent(study, trial, name, dist)
    def before_trial(self, study, trial): self.tpe.before_trial(study, trial)
    def after_trial(self, study, trial, state, values): self.tpe.after_trial(study, trial, state, values)

def make(seed, **kw): return Hybrid(load_space(se.SPACE), seed, **kw)
def h2(seed): return make(seed)
def h2r1(seed): return make(seed, radius=1)
def h3(seed): return make(seed, every=3)
def hall(seed): return make(seed, every=1, start=7)
