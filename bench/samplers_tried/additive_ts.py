"""Experiment: Thompson sampling on a log-additive Bayesian model (an additive GP: one kernel per
parameter), proposing whole configurations near the best so far (a trust region of ``radius``
changed parameters), with the tuner's feasibility forest filtering the candidates.

In the spirit of BOCS (Baptista and Poloczek, 2018) and Add-GP-UCB: launch flags act mostly
independently, so log(throughput) is modelled as a sum of one term per parameter value; numbers
are snapped to a grid whose neighbouring values share an exponential-kernel prior.
"""
import math
import random

import numpy as np
from optuna.samplers import BaseSampler, RandomSampler
from optuna.trial import TrialState

import search_efficiency as se
from tuner.errors import ConfigError
from tuner.space import Config, load_space
from tuner.study.trial import FeasibilityModel, training_label
from tuner.study.record import CONFIG, PRUNED_BY, REUSED_FROM


def grid(param):
    if hasattr(param, "low") and hasattr(param, "high"):
        if getattr(param, "log", False):
            vals = []; v = param.low
            while v <= param.high: vals.append(int(v)); v *= 2
            if vals[-1] != param.high: vals.append(param.high)
        else:
            step = param.step or (param.high - param.low) / 10
            n = round((param.high - param.low) / step)
            vals = [round(param.low + k * step, 6) for k in range(n + 1)]
            if hasattr(param, "grid"): vals = [param.grid.normalize(v) for v in vals]
        return vals + ([None] if param.unset else [])
    return list(param.options())

def observed(trial):
    if trial.state == TrialState.COMPLETE and trial.values: return trial.values[0]
    if trial.state == TrialState.PRUNED and trial.user_attrs.get(PRUNED_BY) == "baseline" and trial.intermediate_values:
        return max(trial.intermediate_values.values())
    return None

class Encoding:
    """One column per (parameter, value); numbers snapped to their grid. Prior covariance per block."""
    def __init__(self, space, tau, ell):
        self.space = space; self.grids = {n: grid(p) for n, p in space.parameters.items()}
        self.index = {}; blocks = []; col = 1
        for name, p in space.parameters.items():
            g = self.grids[name]; numeric = hasattr(p, "low")
            for i, v in enumerate(g): self.index[(name, i)] = col + i
            K = np.eye(len(g)) * tau**2
            if numeric:
                nums = [i for i, v in enumerate(g) if v is not None]
                for a in nums:
                    for b in nums: K[a, b] = tau**2 * math.exp(-abs(a - b) / ell)
            blocks.append(K); col += len(g)
        self.d = col
        P = np.zeros((col, col)); P[0, 0] = 1e6; at = 1
        for K in blocks: P[at:at+len(K), at:at+len(K)] = K; at += len(K)
        self.prior_cov = P
    def slot(self, name, v):
        g = self.grids[name]; p = self.space.parameters[name]
        if v is None: return g.index(None) if None in g else None
        if hasattr(p, "low"):
            nums = [(i, x) for i, x in enumerate(g) if x is not None]
            if getattr(p, "log", False): return min(nums, key=lambda ix: abs(math.log(ix[1]) - math.log(v)))[0]
            return min(nums, key=lambda ix: abs(ix[1] - v))[0]
        for i, x in enumerate(g):
            if x == v and type(x) == type(v): return i
        return None
    def vec(self, config):
        row = np.zeros(self.d); row[0] = 1.0
        for name, v in config.items():
            if name not in self.grids: continue
            i = self.slot(name, v)
            if i is not None: row[self.index[(name, i)]] = 1.0
        return row

class NoisyOr:
    """P(fail) = 1 - exp(-sum of the hazards of a configuration's values): a value either can
    break a server or not; fitted by MAP with an L1 prior (few culprits), hazards >= 0."""
    def __init__(self, enc, l1=0.2):
        self.enc, self.l1, self.rows, self.fails, self.s = enc, l1, [], [], None
    def update(self, config, failed):
        self.rows.append(self.enc.vec(config)); self.fails.append(bool(failed)); self.s = None
    def fit(self):
        from scipy.optimize import minimize
        X = np.array(self.rows); X[:, 0] = 1.0; f = np.array(self.fails)
        def loss(s):
            S = X @ s; S = np.maximum(S, 1e-9)
            lf = np.log1p(-np.exp(-S[f])); ok = S[~f]
            g = X[~f].sum(0) - (X[f] * (np.exp(-S[f]) / (1 - np.exp(-S[f])))[:, None]).sum(0) + self.l1
            return -lf.sum() + ok.sum() + self.l1 * s.sum(), g
        s0 = np.full(X.shape[1], 0.05)
        self.s = minimize(loss, s0, jac=True, method="L-BFGS-B", bounds=[(0, 20)] * X.shape[1]).x
    def p_fail(self, V):
        if not any(self.fails): return np.zeros(len(V))
        if self.s is None: self.fit()
        return 1 - np.exp(-(V @ self.s))

class AdditiveTS(BaseSampler):
    def __init__(self, space, seed=None, radius=3, tau=0.3, sigma=0.05, ell=2.0, p_fail_max=0.5,
                 n_cands=2000, top=1, explore_random=0, fail_model="forest"):
        self.space = space; self.rng = random.Random(seed); self.np = np.random.default_rng(seed)
        self.enc = Encoding(space, tau, ell); self.sigma = sigma; self.radius = radius
        self.p_fail_max = p_fail_max; self.fail_model = fail_model; self.n_cands = n_cands; self.top = top; self.explore_random = explore_random
        self._cache = {}; self._fallback = RandomSampler(seed=seed)
        self.names = list(space.parameters)
    def infer_relative_search_space(self, study, trial): return {}
    def sample_relative(self, study, trial, space): return {}
    def sample_independent(self, study, trial, name, dist):
        if trial.number not in self._cache:
            cfg = self.propose(study)
            self._cache[trial.number] = self.space.params_for_enqueue(cfg) if cfg is not None else {}
        params = self._cache[trial.number]
        if name in params: return params[name]
        return self._fallback.sample_independent(study, trial, name, dist)
    def make(self, values):
        try: return self.space.config(values, drop_inactive=True)
        except ConfigError: return None
    def fill(self, vals):
        for n in self.names: vals.setdefault(n, self.rng.choice(self.enc.grids[n]))
        return self.make(vals)
    def random_config(self): return self.fill({})
    def around(self, config, radius):
        out = []
        for _ in range(self.n_cands):
            k = self.rng.randint(1, radius)
            vals = dict(config)
            for n in self.rng.sample(self.names, k): vals[n] = self.rng.choice(self.enc.grids[n])
            c = self.fill(vals)
            if c is not None: out.append(c)
        return out
    def propose(self, study):
        trials = study.get_trials(deepcopy=False)
        X, y, seen = [], [], set()
        feas = FeasibilityModel(self.space)
        for t in trials:
            cfg = t.user_attrs.get(CONFIG)
            if cfg is None: continue
            seen.add(Config(cfg).key())
            lab = training_label(t)
            if lab is not None: feas.update(cfg, lab, t.number)
            v = observed(t)
            if v is not None and t.user_attrs.get(REUSED_FROM) is None:
                X.append(self.enc.vec(cfg)); y.append(math.log(max(v, 1e-3)))
        if not X: return self.random_config()
        X = np.array(X); y = np.array(y); ybar = y.mean()
        Pinv = np.linalg.inv(self.enc.prior_cov + 1e-9 * np.eye(self.enc.d))
        A = X.T @ X / self.sigma**2 + Pinv
        cov = np.linalg.inv(A); cov = (cov + cov.T) / 2
        mu = cov @ (X.T @ (y - ybar)) / self.sigma**2
        w = self.np.multivariate_normal(mu, cov, method="cholesky")
        ranked = sorted([(observed(t), t.user_attrs[CONFIG]) for t in trials
                         if observed(t) is not None and "config" in t.user_attrs], key=lambda p: -p[0])
        cands = []
        for _, c in ranked[: self.top]: cands += self.around(c, self.radius)
        if self.explore_random: cands += [self.random_config() for _ in range(self.explore_random)]
        cands = [c for c in cands if c is not None and c.key() not in seen
                 and not any(v.action == "skip" for v in self.space.constraint_violations(c))]
        if not cands: return self.random_config()
        uniq = {c.key(): c for c in cands}; cands = list(uniq.values())
        if self.fail_model == "noisy_or":
            nor = NoisyOr(self.enc)
            for cfg, bad in zip(feas.configs, feas.failed): nor.update(cfg, bad)
            pf = nor.p_fail(np.vstack([self.enc.vec(c) for c in cands]))
            cands = [c for c, p in zip(cands, pf) if p <= self.p_fail_max] or cands
        elif any(feas.failed) and not all(feas.failed):
            feas._fit()
            F = np.vstack([feas.vector(c) for c in cands])
            pf = feas._forest.predict_proba(F)[:, list(feas._forest.classes_).index(True)]
            ok = [c for c, p in zip(cands, pf) if p <= self.p_fail_max]
            cands = ok or cands
        S = np.vstack([self.enc.vec(c) for c in cands]) @ w
        return cands[int(np.argmax(S))]

def make(seed, **kw):
    return AdditiveTS(load_space(se.SPACE), seed=seed, **kw)

def r2(seed): return make(seed, radius=2)
def r3(seed): return make(seed, radius=3)
def r4(seed): return make(seed, radius=4)
def r3top3(seed): return make(seed, radius=3, top=3)
def r3rand(seed): return make(seed, radius=3, explore_random=300)
def r12(seed): return make(seed, radius=12)
def r6(seed): return make(seed, radius=6)
def r3nor(seed): return make(seed, radius=3, fail_model="noisy_or")
def r6nor(seed): return make(seed, radius=6, fail_model="noisy_or")
def r12nor(seed): return make(seed, radius=12, fail_model="noisy_or")
