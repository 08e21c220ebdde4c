"""Experiment: SMAC-style random-forest surrogate (scikit-learn), expected improvement over local-search
and random candidates, times P(feasible) from the tuner's feasibility forest."""
import math, random
import numpy as np
from scipy.stats import norm
from sklearn.ensemble import RandomForestRegressor, ExtraTreesRegressor
import search_efficiency as se
from tuner.space import load_space, Config
from tuner.study.trial import FeasibilityModel, training_label
from tuner.study.record import CONFIG, REUSED_FROM
from additive_ts import AdditiveTS, observed

class SmacLike(AdditiveTS):
    def __init__(self, space, seed=None, interleave=0.2, n_random=500, fail_value="impute", extra=False, **kw):
        super().__init__(space, seed=seed, **kw)
        self.interleave, self.n_random, self.fail_value, self.extra = interleave, n_random, fail_value, extra
        self.seed = seed
    def one_changes(self, config):
        out = []
        for n in self.names:
            for v in self.enc.grids[n]:
                vals = dict(config); vals[n] = v
                c = self.fill(vals)
                if c is not None: out.append(c)
        return out
    def propose(self, study):
        trials = study.get_trials(deepcopy=False)
        feas = FeasibilityModel(self.space); X, y, seen = [], [], set()
        for t in trials:
            cfg = t.user_attrs.get(CONFIG)
            if cfg is None: continue
            seen.add(Config(cfg).key())
            lab = training_label(t)
            if lab is not None: feas.update(cfg, lab, t.number)
            v = observed(t)
            if t.user_attrs.get(REUSED_FROM) is not None: continue
            if v is not None: X.append(feas.vector(cfg)); y.append(math.log(max(v, 1.0)))
            elif lab and self.fail_value == "impute": X.append(feas.vector(cfg)); y.append(None)
        if len([v for v in y if v is not None]) < 2 or self.rng.random() < self.interleave:
            return self.random_config()
        worst = min(v for v in y if v is not None)
        y = np.array([worst if v is None else v for v in y]); X = np.vstack(X)
        Model = ExtraTreesRegressor if self.extra else RandomForestRegressor
        forest = Model(n_estimators=50, max_features=None if self.extra else 0.83, min_samples_leaf=1,
                       bootstrap=True, random_state=self.rng.randrange(1 << 30)).fit(X, y)
        incumbents = sorted({Config(t.user_attrs[CONFIG]).key(): (observed(t), t.user_attrs[CONFIG]) for t in trials if observed(t) is not None and "config" in t.user_attrs}.values(), key=lambda p: -p[0])
        cands = [self.random_config() for _ in range(self.n_random)]
        # local search: iterated best-improvement from the top 5 incumbents on predicted mean
        def mean_std(cs):
            F = np.vstack([feas.vector(c) for c in cs])
            per = np.stack([t.predict(F) for t in forest.estimators_])
            return per.mean(0), per.std(0) + 1e-9
        best_y = y.max()
        def ei(cs):
            m, s = mean_std(cs); z = (m - best_y) / s
            return (m - best_y) * norm.cdf(z) + s * norm.pdf(z)
        for _, start in incumbents[:5]:
            cur = self.make(dict(start))
            for _ in range(3):
                nb = [c for c in self.one_changes(cur) if c.key() not in seen]
                if not nb: break
                e = ei(nb); i = int(np.argmax(e)); cands.append(nb[i]); cur = nb[i]
        cands = [c for c in cands if c is not None and c.key() not in seen
                 and not any(v.action == "skip" for v in self.space.constraint_violations(c))]
        cands = list({c.key(): c for c in cands}.values())
        score = ei(cands)
        if any(feas.failed) and not all(feas.failed):
            feas._fit(); F = np.vstack([feas.vector(c) for c in cands])
            pf = feas._forest.predict_proba(F)[:, list(feas._forest.classes_).index(True)]
            score = score * (1 - pf)
        return cands[int(np.argmax(score))]

def make(seed, **kw): return SmacLike(load_space(se.SPACE), seed=seed, **kw)
def s(seed): return make(seed)
def s0(seed): return make(seed, interleave=0.0)
def sx(seed): return make(seed, extra=True)
def snofail(seed): return make(seed, fail_value=None)
