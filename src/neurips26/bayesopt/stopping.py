"""GP-UCB on a finite domain with instantaneous regret bounds and (ε, δ) stopping.

Setting (Srinivas et al. 2010, Theorem 1): f is a draw from the GP prior on a finite domain
D, observations y = f(x) + noise of variance σ_n². GP-UCB picks x_t = argmax_x μ_{t−1}(x) +
β_t^{1/2} σ_{t−1}(x) with β_t = 2 log(|D| t² π² / (6δ)); then with probability ≥ 1 − δ,
|f(x) − μ_{t−1}(x)| ≤ β_t^{1/2} σ_{t−1}(x) for all x ∈ D and t ≥ 1.

Bounds on the instantaneous regret r_t = f(x*) − f(x_t):

* classical: r_t ≤ 2 β_t^{1/2} σ_{t−1}(x_t) (both confidence bounds from the union over D);
* tighter: r_t ≤ (β_t^{1/2} + β′_t^{1/2}) σ_{t−1}(x_t), β′_t = 2 log(t² π² / (3δ)).
  Proof sketch. Split δ in two halves. (i) x* is one fixed point: f(x*) ≤ μ_{t−1}(x*) +
  β′_t^{1/2} σ_{t−1}(x*) for all t w.p. ≥ 1 − δ/2 (Gaussian tail, union over t only:
  Σ_t 6δ/(2π² t²) = δ/2); since β′_t ≤ β_t, this is ≤ UCB_t(x*) ≤ UCB_t(x_t). (ii) x_t is
  chosen from the past (predictable), so given the past f(x_t) ∼ N(μ_{t−1}(x_t), σ²_{t−1}(x_t))
  and f(x_t) ≥ μ_{t−1}(x_t) − β′_t^{1/2} σ_{t−1}(x_t) for all t w.p. ≥ 1 − δ/2. Together:
  r_t ≤ UCB_t(x_t) − μ_{t−1}(x_t) + β′_t^{1/2} σ_{t−1}(x_t) = (β_t^{1/2} + β′_t^{1/2}) σ_{t−1}(x_t),
  for all t at once w.p. ≥ 1 − δ. Neither event needs the union over D, which only the
  algorithm's own β_t (to make x_t the UCB maximizer) keeps. Step (i) uses β′_t ≤ β_t,
  i.e. |D| ≥ 2, and then the tighter bound is strictly smaller.

The (ε, δ) rule stops at the first t whose bound is ≤ ε and returns that x_t: it is
ε-optimal with probability ≥ 1 − δ, as the bounds hold for all t simultaneously.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._checks import check_box, check_int, check_points, check_real
from ._gp import fit_gp

__all__ = ["SrinivasFinite", "SrinivasContinuous", "ChowdhuryGopalan", "regret_bounds", "StopDecision", "EpsDeltaRule", "UCBLCBGapRule", "EIThresholdRule",
           "FixedBudget", "RuleRace", "gp_posterior", "gp_ucb", "bayes_opt_loop", "BOResult"]


@dataclass(frozen=True)
class SrinivasFinite:
    """β_t = 2 log(|D| t² π² / (6δ)) for a finite domain of ``size`` points."""

    size: int
    delta: float

    def __post_init__(self):
        if not (self.size >= 1 and 0 < self.delta < 1):
            raise ValueError(f"need size >= 1 and 0 < delta < 1, got {self.size}, {self.delta}")

    def __call__(self, t: int) -> float:
        return 2 * math.log(self.size * t**2 * math.pi**2 / (6 * self.delta))


@dataclass(frozen=True)
class SrinivasContinuous:
    """Srinivas et al. (2010), Theorem 2, for D ⊂ [0, r]^d compact and convex, when the
    kernel's sample paths satisfy P(sup |∂f/∂x_j| > L) ≤ a·exp(−(L/b)²):
    β_t = 2 log(2 t² π² / (3δ)) + 2 d log(t² d b r √(log(4 d a / δ)))."""

    dim: int
    delta: float
    a: float = 1.0
    b: float = 1.0
    r: float = 1.0

    def __post_init__(self):
        if not (self.dim >= 1 and 0 < self.delta < 1 and self.a > 0 and self.b > 0 and self.r > 0):
            raise ValueError(f"need dim >= 1, 0 < delta < 1 and a, b, r > 0, got {self}")

    def __call__(self, t: int) -> float:
        d = self.dim
        inner = t**2 * d * self.b * self.r * math.sqrt(math.log(4 * d * self.a / self.delta))
        return 2 * math.log(2 * t**2 * math.pi**2 / (3 * self.delta)) + 2 * d * math.log(max(inner, 1.0))


@dataclass(frozen=True)
class ChowdhuryGopalan:
    """Frequentist confidence width for f in the RKHS of k with ‖f‖_k ≤ B and R-sub-Gaussian
    noise (Chowdhury & Gopalan 2017, Theorem 2, in its computable log-det form): for the
    posterior with noise variance λ = 1 + η, with probability ≥ 1 − δ, for all x and t,

        |f(x) − μ_{t−1}(x)| ≤ β_t^{1/2} σ_{t−1}(x),
        β_t^{1/2} = B + R √(log det((1 + η) I + K_{t−1}) + 2 log(1/δ)),

    K_{t−1} the kernel matrix of the points observed so far. (The theorem's γ_{t−1} + 1 form
    is this with log det bounded by the maximum information gain.)"""

    B: float
    R: float
    delta: float
    eta: float = 0.01

    def __post_init__(self):
        if not (self.B >= 0 and self.R >= 0 and 0 < self.delta < 1 and self.eta > 0):
            raise ValueError(f"need B, R >= 0, 0 < delta < 1, eta > 0, got {self}")

    @property
    def noise(self) -> float:
        """The λ the posterior must use for the bound to hold."""
        return 1.0 + self.eta

    def __call__(self, K_past: torch.Tensor) -> float:
        n = K_past.shape[0]
        logdet = torch.logdet(K_past + self.noise * torch.eye(n, dtype=K_past.dtype)) if n else torch.tensor(0.0)
        return (self.B + self.R * math.sqrt(float(logdet) + 2 * math.log(1 / self.delta))) ** 2


def regret_bounds(t: int, sigma: float, beta: float, delta: float) -> tuple[float, float]:
    """(classical, tighter) bounds on r_t from the posterior sd σ_{t−1}(x_t) (module docstring).
    The tighter proof needs β′_t ≤ β_t, true for |D| ≥ 2; for a one-point domain (regret 0
    anyway) the classical bound is returned for both."""
    check_int("t", t, 1)
    check_real("sigma", sigma, low=0.0)
    check_real("beta", beta, low=0.0)
    check_real("delta", delta, low=0.0, low_open=True, high=1.0, high_open=True)
    beta_single = 2 * math.log(t**2 * math.pi**2 / (3 * delta))
    classical = 2 * math.sqrt(beta) * sigma
    if beta_single > beta:
        return classical, classical
    return classical, (math.sqrt(beta) + math.sqrt(beta_single)) * sigma


def gp_posterior(K: torch.Tensor, observed: list[int], y: torch.Tensor, noise: float):
    """Exact posterior mean and sd on every point of the finite domain, from the prior
    covariance K (|D|, |D|) and noisy observations y at the indices ``observed``."""
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square (|D|, |D|) covariance, got shape {tuple(K.shape)}")
    check_real("noise", noise, low=0.0)
    if y.shape != (len(observed),):
        raise ValueError(f"y must hold one value per index in observed ({len(observed)}), got shape {tuple(y.shape)}")
    if not observed:
        return torch.zeros(len(K), dtype=K.dtype), K.diagonal().sqrt()
    idx = torch.tensor(observed)
    Koo = K[idx][:, idx] + noise * torch.eye(len(idx), dtype=K.dtype)
    L = torch.linalg.cholesky(Koo)
    Kdo = K[:, idx]
    alpha = torch.cholesky_solve(y[:, None], L)[:, 0]
    v = torch.linalg.solve_triangular(L, Kdo.T, upper=False)
    var = (K.diagonal() - (v**2).sum(0)).clamp_min(0)
    return Kdo @ alpha, var.sqrt()


@dataclass
class StopDecision:
    stop: bool
    bound: float
    incumbent: int  # index into the domain
    reason: str


class EpsDeltaRule:
    """Stop once the instantaneous regret bound (``tight`` or classical) is ≤ ε; return x_t."""

    def __init__(self, eps: float, delta: float, tight: bool = True):
        if not (eps > 0 and 0 < delta < 1):
            raise ValueError(f"need eps > 0 and 0 < delta < 1, got {eps}, {delta}")
        self.eps, self.delta, self.tight = eps, delta, tight

    def update(self, t, x_t, mu, sd, beta) -> StopDecision:
        classical, tighter = regret_bounds(t, float(sd[x_t]), beta, self.delta)
        bound = tighter if self.tight else classical
        return StopDecision(bound <= self.eps, bound, x_t, f"regret bound {bound:.4g} vs eps {self.eps}")


class UCBLCBGapRule:
    """Makarova et al. (2022): stop when max UCB − max LCB ≤ ε; return argmax LCB."""

    def __init__(self, eps: float):
        self.eps = check_real("eps", eps, low=0.0)

    def update(self, t, x_t, mu, sd, beta) -> StopDecision:
        lcb = mu - math.sqrt(beta) * sd
        gap = float((mu + math.sqrt(beta) * sd).max() - lcb.max())
        return StopDecision(gap <= self.eps, gap, int(lcb.argmax()), f"UCB-LCB gap {gap:.4g}")


class EIThresholdRule:
    """Stop when the largest expected improvement over the best posterior mean is ≤ threshold."""

    def __init__(self, threshold: float):
        self.threshold = check_real("threshold", threshold, low=0.0)

    def update(self, t, x_t, mu, sd, beta) -> StopDecision:
        best = mu.max()
        z = (mu - best) / sd.clamp_min(1e-12)
        normal = torch.distributions.Normal(0.0, 1.0)
        ei = float(((mu - best) * normal.cdf(z) + sd * normal.log_prob(z).exp()).max())
        return StopDecision(ei <= self.threshold, ei, int(mu.argmax()), f"max EI {ei:.4g}")


class FixedBudget:
    def __init__(self, budget: int):
        self.budget = check_int("budget", budget, 1)

    def update(self, t, x_t, mu, sd, beta) -> StopDecision:
        return StopDecision(t >= self.budget, float(self.budget - t), int(mu.argmax()), f"iteration {t}")


class RuleRace:
    """Run several rules along one trajectory: GP-UCB's choices do not depend on the
    stopping rule, so each rule's first stop on a shared run is where it would have stopped
    on its own. ``first[name] = (t, decision)``; stops once every rule has stopped."""

    def __init__(self, rules: dict):
        if not rules:
            raise ValueError("RuleRace needs at least one rule")
        self.rules = dict(rules)
        self.first: dict = {}
        self.last: dict = {}
        self.points: dict = {}  # name -> the incumbent as a point, where the loop supplies domains
        self._now: list = []

    def update(self, t, x_t, mu, sd, beta) -> StopDecision:
        self._now = []
        for name, rule in self.rules.items():
            if name not in self.first:
                d = rule.update(t, x_t, mu, sd, beta)
                self.last[name] = (t, d)
                self._now.append(name)
                if d.stop:
                    self.first[name] = (t, d)
        done = len(self.first) == len(self.rules)
        return StopDecision(done, float(len(self.rules) - len(self.first)), x_t,
                            f"{len(self.first)}/{len(self.rules)} rules stopped")

    def attach_points(self, domain: torch.Tensor) -> None:
        """Record the incumbents of the rules just updated as points of ``domain`` (the
        loop's domain changes every iteration, so an index alone would not identify them)."""
        for name in self._now:
            self.points[name] = domain[self.last[name][1].incumbent].clone()

    def outcome(self, name):
        """(stopping iteration or the last iteration seen, decision, whether it stopped)."""
        if name in self.first:
            return (*self.first[name], True)
        return (*self.last[name], False)


def gp_ucb(f: torch.Tensor, K: torch.Tensor, noise: float, rule, delta: float, max_iter: int,
           generator: torch.Generator | None = None) -> tuple[StopDecision, int]:
    """GP-UCB on a finite domain with known prior K and true values f, until ``rule`` stops
    (or ``max_iter``). ``delta`` sets the algorithm's β_t; a rule's own δ only enters its
    bound. Returns the decision and the iteration it came at."""
    if K.ndim != 2 or K.shape[0] != K.shape[1] or f.shape != (K.shape[0],):
        raise ValueError(f"K must be (|D|, |D|) and f (|D|,), one value per point of the domain, got K "
                         f"{tuple(K.shape)} and f {tuple(f.shape)}")
    check_real("noise", noise, low=0.0)
    check_int("max_iter", max_iter, 1)
    beta_fn = SrinivasFinite(len(K), delta)
    observed, ys = [], []
    decision = None
    for t in range(1, max_iter + 1):
        mu, sd = gp_posterior(K, observed, torch.tensor(ys, dtype=K.dtype), noise)
        beta = beta_fn(t)
        x_t = int((mu + math.sqrt(beta) * sd).argmax())
        decision = rule.update(t, x_t, mu, sd, beta)
        if decision.stop:
            return decision, t
        observed.append(x_t)
        ys.append(float(f[x_t]) + math.sqrt(noise) * float(torch.randn(1, generator=generator, dtype=K.dtype)))
    return decision, max_iter


@dataclass
class BOResult:
    X: torch.Tensor  # (n, d) every evaluated point
    Y: torch.Tensor  # (n,) their values
    decision: StopDecision
    iterations: int
    incumbent: torch.Tensor  # the point the rule returns


def bayes_opt_loop(objective, bounds: torch.Tensor, stopping, delta: float = 0.1, n_init: int = 5,
                   max_iter: int = 50, n_candidates: int = 1024, seed: int = 0, noise: float | None = None,
                   candidates: torch.Tensor | None = None) -> BOResult:
    """GP-UCB with BoTorch until ``stopping`` says stop: maximize ``objective`` (a callable
    on (n, d) tensors returning (n,)) over the box ``bounds`` (2, d).

    Each iteration fits a ``SingleTaskGP`` (``fit_gp``; ``noise`` fixes the
    observation variance instead of learning it), takes x_t = argmax of BoTorch's
    ``UpperConfidenceBound`` with β_t (``optimize_acqf``), and hands the rule the posterior
    on a fixed Sobol set of ``n_candidates`` points plus x_t, the finite domain over which
    β_t = 2 log(|D| t² π² / (6δ)) is taken and the rules compare bounds. With
    ``candidates`` (N, d) the domain is that finite set (an HPO grid, say): x_t is the exact
    UCB maximizer over it and the initial points are drawn from it.
    """
    from botorch.acquisition import UpperConfidenceBound
    from botorch.optim import optimize_acqf
    from torch.quasirandom import SobolEngine

    bounds = check_box("bounds", torch.as_tensor(bounds, dtype=torch.float64))
    n_init = check_int("n_init", n_init, 1)
    max_iter = check_int("max_iter", max_iter, 1)
    n_candidates = check_int("n_candidates", n_candidates, 1)
    if noise is not None:
        check_real("noise", noise, low=0.0)
    d = bounds.shape[1]
    sobol = SobolEngine(d, scramble=True, seed=seed)
    unit = lambda u: bounds[0] + (bounds[1] - bounds[0]) * u  # noqa: E731
    if candidates is not None:
        cands = check_points("candidates", torch.as_tensor(candidates, dtype=torch.float64), d, rows="N")
        if len(cands) < 2:
            raise ValueError(f"candidates must be (N >= 2, {d}), got {tuple(cands.shape)}")
        pick = torch.randperm(len(cands), generator=torch.Generator().manual_seed(seed))[:n_init]
        X = cands[pick]
    else:
        cands = unit(sobol.draw(n_candidates, dtype=torch.float64))
        X = unit(sobol.draw(n_init, dtype=torch.float64))
    Y = torch.as_tensor(objective(X), dtype=torch.float64).reshape(-1)
    if not torch.isfinite(Y).all():
        raise ValueError("the objective returned NaN or Inf at the initial points")
    beta_fn = SrinivasFinite(len(cands) if candidates is not None else len(cands) + 1, delta)
    decision = None
    for t in range(1, max_iter + 1):
        # inputs normalized to the data's own range; a failed fit stops the loop
        model = fit_gp(X, Y, noise=noise, strict=True)
        beta = beta_fn(t)
        if candidates is not None:
            domain = cands
            with torch.no_grad():
                post = model.posterior(domain)
                mu, sd = post.mean[:, 0], post.variance[:, 0].clamp_min(0).sqrt()
            i_t = int((mu + math.sqrt(beta) * sd).argmax())
            x_t = domain[i_t:i_t + 1]
        else:
            x_t, _ = optimize_acqf(UpperConfidenceBound(model, beta=beta), bounds, q=1, num_restarts=4,
                                   raw_samples=128)
            domain = torch.cat([cands, x_t])
            with torch.no_grad():
                post = model.posterior(domain)
                mu, sd = post.mean[:, 0], post.variance[:, 0].clamp_min(0).sqrt()
            i_t = len(domain) - 1
        decision = stopping.update(t, i_t, mu, sd, beta)
        if isinstance(stopping, RuleRace):
            stopping.attach_points(domain)
        if decision.stop:
            return BOResult(X, Y, decision, t, domain[decision.incumbent])
        y_t = torch.as_tensor(objective(x_t), dtype=torch.float64).reshape(-1)
        if not torch.isfinite(y_t).all():
            raise ValueError(f"the objective returned {y_t.tolist()} at {x_t.tolist()}")
        X, Y = torch.cat([X, x_t]), torch.cat([Y, y_t])
    return BOResult(X, Y, decision, max_iter, domain[decision.incumbent])
