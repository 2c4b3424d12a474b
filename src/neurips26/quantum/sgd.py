"""QNSGD and QPSGD: normalized / projected SGD whose gradients come from a mean estimator
run on the stochastic gradient oracle (quantum or classical), with every query counted.

* :func:`normalized_sgd` / :func:`qnsgd`: ``x ← x − η g/‖g‖₂`` through the library's functional
  NSGD core :func:`neurips26.geometry.nsgd_step` (ℓ2 norm, β = 0, no momentum buffer); ``g`` is
  the estimate of ∇f(x) from ``estimator``. ``qnsgd`` uses :class:`~neurips26.quantum.mean.HeavyTailedMean`
  at accuracy ``eps/4`` (the paper's schedule: with gradient error ≤ ε/4 and η ≤ ε/(2L) every step
  while ‖∇f‖ > ε decreases f by ≥ ηε/4, so ``O(Δ L / ε²)`` steps of ``Õ(ε^{−p/(2(p−1))})`` queries).
  The classical minibatch NSGD baseline is the same loop with a minibatch mean.
* :func:`projected_sgd` / :func:`qpsgd`: ``x ← Π_C(x − η g)`` on a convex set (:class:`Ball`,
  :class:`Box`), ``g`` from an unbiased estimator (:class:`~neurips26.quantum.mean.UnbiasedMLMC`),
  returning the running average of the iterates.
* :func:`clipped_sgd`: the classical baselines clipped SGD and (``clip=None``) plain SGD, run with
  the libraries users already use — ``torch.nn.utils.clip_grad_norm_`` then ``torch.optim.SGD.step``
  on a float64 parameter whose ``.grad`` is the estimate.
* :class:`QNSGD`, :class:`QPSGD`: ``torch.optim.Optimizer`` shells whose ``step(oracle)`` takes
  the gradient oracle at the current (flattened) parameters.

Traces carry the true gradient norm / objective at each iterate, computed from the oracle's
``grad_fn`` / ``f`` for the record only (not charged as queries).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np
import torch

from .._checks import check_int, check_real
from ..geometry import L2, nsgd_step
from .mean import HeavyTailedMean, UnbiasedMLMC
from .multivariate import MultivariateMean
from .oracles import DiscreteOracle, GradientOracle, QueryCounter, as_rng

__all__ = ["Trace", "Ball", "Box", "normalized_sgd", "qnsgd", "clipped_sgd", "minibatch_estimator", "projected_sgd", "qpsgd",
           "QNSGD", "QPSGD"]


class Trace(NamedTuple):
    """``iterates (T+1, d)`` (QPSGD: the averaged iterates), ``grad_norms (T+1,)`` (true ‖∇f‖ at
    them), ``values (T+1,)`` (f at them, NaN without ``oracle.f``), ``queries (T+1,)`` cumulative,
    ``reached``: whether the stopping target was met."""

    iterates: np.ndarray
    grad_norms: np.ndarray
    values: np.ndarray
    queries: np.ndarray
    reached: bool


@dataclass(frozen=True)
class Ball:
    """{x : ‖x − center‖₂ ≤ radius}."""

    radius: float = 1.0
    center: float = 0.0

    def __post_init__(self):
        check_real("radius", self.radius, low=0.0, low_open=True)
        check_real("center", self.center)

    def project(self, x: np.ndarray) -> np.ndarray:
        y = x - self.center
        n = np.linalg.norm(y)
        return x if n <= self.radius else self.center + y * (self.radius / n)

    def contains(self, x, tol=1e-12) -> bool:
        return bool(np.linalg.norm(np.asarray(x) - self.center) <= self.radius * (1 + tol))


@dataclass(frozen=True)
class Box:
    """{x : low ≤ x_i ≤ high}."""

    low: float = -1.0
    high: float = 1.0

    def __post_init__(self):
        check_real("low", self.low)
        check_real("high", self.high)
        if not self.low < self.high:
            raise ValueError(f"Box needs low < high, got {self.low} and {self.high}")

    def project(self, x: np.ndarray) -> np.ndarray:
        return np.clip(x, self.low, self.high)

    def contains(self, x, tol=1e-12) -> bool:
        x = np.asarray(x)
        return bool((x >= self.low - tol).all() and (x <= self.high + tol).all())


def _check_x0(oracle, x0) -> np.ndarray:
    if not isinstance(oracle, GradientOracle):
        raise TypeError(f"oracle must be a GradientOracle, got {type(oracle).__name__}")
    x = np.array(x0, dtype=float).reshape(-1)
    if x.shape != (oracle.d,) or not np.isfinite(x).all():
        raise ValueError(f"x0 must be a finite vector of {oracle.d} entries, got shape {np.shape(x0)}")
    return x


def _value(oracle, x) -> float:
    return float(oracle.f(x)) if oracle.f is not None else float("nan")


def minibatch_estimator(b: int) -> Callable:
    """A classical estimator: the mean of b samples (b queries). For ``b > 4K`` (K atoms) the
    batch is drawn as its multinomial atom counts, the same law at O(K) cost instead of O(b)."""
    b = check_int("b (batch size)", b, minimum=1)

    def estimate(o: DiscreteOracle, rng, counter):
        if b > 4 * o.K:
            counts = rng.multinomial(b, o.probs)
            if counter is not None:
                counter.charge_samples(b)
            return counts @ o.values / b
        return o.sample(b, rng, counter).mean(axis=0)

    return estimate


def _descend(oracle: GradientOracle, x: np.ndarray, estimator: Callable, max_queries: int, stop_eps, max_steps,
             rng, counter: QueryCounter | None, step: Callable[[np.ndarray], np.ndarray]) -> Trace:
    """The loop the first-order methods here share: ``x ← step(g)`` with ``g = estimator(oracle.at(x), rng,
    counter)``, recording iterate, true ‖∇f‖, value and queries spent; stops once ‖∇f(x)‖ <= ``stop_eps``
    (if given), after the step that reaches or passes ``max_queries``, or after ``max_steps`` steps.
    ``step`` holds the method's own state (its parameter) and returns the new iterate."""
    if stop_eps is not None:
        stop_eps = check_real("stop_eps", stop_eps, low=0.0, low_open=True)
    if max_steps is not None:
        max_steps = check_int("max_steps", max_steps, minimum=0)
    if not callable(estimator):
        raise TypeError("estimator must be callable (oracle, rng, counter) -> gradient estimate")
    rng = as_rng(rng)
    counter = counter if counter is not None else QueryCounter()
    q0 = counter.queries
    its, gns, vals, qs = [x.copy()], [float(np.linalg.norm(oracle.grad(x)))], [_value(oracle, x)], [0]
    reached = stop_eps is not None and gns[-1] <= stop_eps
    steps = 0
    while not reached and counter.queries - q0 < max_queries and (max_steps is None or steps < max_steps):
        g = np.asarray(estimator(oracle.at(x), rng, counter), float).reshape(-1)
        x = step(g)
        steps += 1
        its.append(x)
        gns.append(float(np.linalg.norm(oracle.grad(x))))
        vals.append(_value(oracle, x))
        qs.append(counter.queries - q0)
        reached = stop_eps is not None and gns[-1] <= stop_eps
    return Trace(np.array(its), np.array(gns), np.array(vals), np.array(qs), bool(reached))


def normalized_sgd(oracle: GradientOracle, x0, *, eta: float, estimator: Callable, max_queries: int,
                   stop_eps: float | None = None, max_steps: int | None = None, rng=None,
                   counter: QueryCounter | None = None) -> Trace:
    """Normalized SGD ``x ← x − η g/‖g‖₂`` (each step moves exactly η) with
    ``g = estimator(oracle.at(x), rng, counter)``; stops once the true ‖∇f(x)‖ <= ``stop_eps``
    (if given), when the next step would exceed ``max_queries``... precisely: after the step that
    reaches or passes it, or after ``max_steps`` steps."""
    x = _check_x0(oracle, x0)
    eta = check_real("eta", eta, low=0.0, low_open=True)
    max_queries = check_int("max_queries", max_queries, minimum=1)
    xt = torch.tensor(x, dtype=torch.float64)
    norm = L2()

    def step(g: np.ndarray) -> np.ndarray:
        nsgd_step([xt], [torch.from_numpy(g)], None, [norm], lr=eta, beta=0.0, weight_decay=0.0, nesterov=False)
        return xt.numpy().copy()

    return _descend(oracle, x, estimator, max_queries, stop_eps, max_steps, rng, counter, step)


def clipped_sgd(oracle: GradientOracle, x0, *, eta: float, estimator: Callable, max_queries: int,
                clip: float | None = None, stop_eps: float | None = None, max_steps: int | None = None, rng=None,
                counter: QueryCounter | None = None) -> Trace:
    """Clipped SGD ``x ← x − η min(1, λ/‖g‖₂) g`` (``clip`` = λ), or plain SGD ``x ← x − η g`` with
    ``clip=None``, ``g = estimator(oracle.at(x), rng, counter)``: ``torch.nn.utils.clip_grad_norm_``
    and ``torch.optim.SGD`` (no momentum, no weight decay) on one float64 parameter. Stopping as in
    :func:`normalized_sgd`."""
    x = _check_x0(oracle, x0)
    eta = check_real("eta", eta, low=0.0, low_open=True)
    max_queries = check_int("max_queries", max_queries, minimum=1)
    if clip is not None:
        clip = check_real("clip", clip, low=0.0, low_open=True)
    param = torch.nn.Parameter(torch.tensor(x, dtype=torch.float64))
    opt = torch.optim.SGD([param], lr=eta, momentum=0.0, weight_decay=0.0)
    steps = 0

    def step(g: np.ndarray) -> np.ndarray:
        nonlocal steps
        steps += 1
        param.grad = torch.from_numpy(g.copy())
        if clip is not None:
            torch.nn.utils.clip_grad_norm_([param], clip)
        opt.step()
        x = param.detach().numpy().copy()
        if not np.isfinite(x).all():
            raise FloatingPointError(f"clipped_sgd diverged at step {steps} (eta = {eta} too large?)")
        return x

    return _descend(oracle, x, estimator, max_queries, stop_eps, max_steps, rng, counter, step)


def qnsgd(oracle: GradientOracle, x0, *, eta: float, eps: float, max_queries: int,
          estimator: HeavyTailedMean | MultivariateMean | None = None,
          p: float = 2.0, accuracy: float | None = None, max_steps: int | None = None, rng=None,
          counter: QueryCounter | None = None) -> Trace:
    """QNSGD: normalized SGD with gradients from the quantum heavy-tailed estimator at accuracy
    ``accuracy`` (default ``eps/4``); stops at the first iterate with ‖∇f‖ <= eps. The default
    estimator is ``HeavyTailedMean(p, ν)`` with ν the exact per-coordinate p-th moment of the noise;
    a :class:`~neurips26.quantum.multivariate.MultivariateMean` (ℓ2 moment bound) may be passed instead."""
    eps = check_real("eps", eps, low=0.0, low_open=True)
    acc = eps / 4 if accuracy is None else check_real("accuracy", accuracy, low=0.0, low_open=True)
    if estimator is None:
        _check_x0(oracle, x0)
        nu = max(DiscreteOracle(oracle.noise.values[:, i], oracle.noise.probs).moment(p) for i in range(oracle.d))
        estimator = HeavyTailedMean(p, nu)
    if not isinstance(estimator, (HeavyTailedMean, MultivariateMean)):
        raise TypeError(f"estimator must be a HeavyTailedMean or a MultivariateMean, got {type(estimator).__name__}")

    def estimate(o, rng, counter):
        return estimator(o, eps=acc, rng=rng, counter=counter).estimate

    return normalized_sgd(oracle, x0, eta=eta, estimator=estimate, max_queries=max_queries, stop_eps=eps,
                          max_steps=max_steps, rng=rng, counter=counter)


def projected_sgd(oracle: GradientOracle, x0, *, eta: float, domain, estimator: Callable, max_queries: int,
                  f_star: float | None = None, stop_eps: float | None = None, max_steps: int | None = None,
                  rng=None, counter: QueryCounter | None = None) -> Trace:
    """Projected SGD ``x ← Π(x − η g)`` returning the running average of ``x_1..x_t`` in the trace;
    stops once ``f(x̄) − f_star <= stop_eps`` (needs ``oracle.f`` and ``f_star``), at ``max_queries``
    or after ``max_steps``. ``estimator(oracle_at_x, rng, counter) -> g``."""
    x = _check_x0(oracle, x0)
    eta = check_real("eta", eta, low=0.0, low_open=True)
    max_queries = check_int("max_queries", max_queries, minimum=1)
    if not hasattr(domain, "project"):
        raise TypeError("domain must have a project(x) method (Ball, Box)")
    if stop_eps is not None:
        stop_eps = check_real("stop_eps", stop_eps, low=0.0, low_open=True)
        if f_star is None or oracle.f is None:
            raise ValueError("stop_eps needs f_star and an oracle with f")
    if max_steps is not None:
        max_steps = check_int("max_steps", max_steps, minimum=0)
    rng = as_rng(rng)
    counter = counter if counter is not None else QueryCounter()
    q0 = counter.queries
    x = domain.project(x)
    avg = x.copy()
    its, gns, vals, qs = [avg.copy()], [float(np.linalg.norm(oracle.grad(avg)))], [_value(oracle, avg)], [0]

    def done():
        return stop_eps is not None and vals[-1] - f_star <= stop_eps

    reached, t = done(), 0
    while not reached and counter.queries - q0 < max_queries and (max_steps is None or t < max_steps):
        g = np.asarray(estimator(oracle.at(x), rng, counter), float).reshape(-1)
        x = domain.project(x - eta * g)
        t += 1
        avg += (x - avg) / t if t > 1 else (x - avg)
        its.append(avg.copy())
        gns.append(float(np.linalg.norm(oracle.grad(avg))))
        vals.append(_value(oracle, avg))
        qs.append(counter.queries - q0)
        reached = done()
    return Trace(np.array(its), np.array(gns), np.array(vals), np.array(qs), bool(reached))


def qpsgd(oracle: GradientOracle, x0, *, eta: float, domain, mlmc: UnbiasedMLMC, max_queries: int,
          f_star: float | None = None, stop_eps: float | None = None, max_steps: int | None = None, rng=None,
          counter: QueryCounter | None = None) -> Trace:
    """QPSGD: :func:`projected_sgd` fed by the unbiased MLMC estimator ``mlmc``."""
    if not isinstance(mlmc, UnbiasedMLMC):
        raise TypeError(f"mlmc must be an UnbiasedMLMC, got {type(mlmc).__name__}")
    return projected_sgd(oracle, x0, eta=eta, domain=domain, max_queries=max_queries, f_star=f_star,
                         stop_eps=stop_eps, max_steps=max_steps, rng=rng, counter=counter,
                         estimator=lambda o, r, c: mlmc(o, rng=r, counter=c).estimate)


class _OracleOptimizer(torch.optim.Optimizer):
    """Shared shell: the parameters flattened into one float64 vector for the oracle."""

    def __init__(self, params, defaults, seed):
        super().__init__(params, defaults)
        self.rng = as_rng(seed)
        self.counter = QueryCounter()

    def _flat(self):
        ps = [p for g in self.param_groups for p in g["params"]]
        return ps, torch.cat([p.detach().reshape(-1).double() for p in ps]).numpy()

    def _grad(self, oracle, x):
        raise NotImplementedError

    @torch.no_grad()
    def step(self, oracle: GradientOracle):  # type: ignore[override]
        if not isinstance(oracle, GradientOracle):
            raise TypeError(f"step needs the GradientOracle at the current parameters, got {type(oracle).__name__}")
        ps, x = self._flat()
        if oracle.d != x.size:
            raise ValueError(f"the oracle is {oracle.d}-dimensional but the parameters have {x.size} entries")
        g = torch.from_numpy(np.asarray(self._grad(oracle, x), float))
        self._apply(ps, g)
        return None

    def _split(self, ps, v):
        out, i = [], 0
        for p in ps:
            out.append(v[i : i + p.numel()].reshape(p.shape).to(p.dtype))
            i += p.numel()
        return out


class QNSGD(_OracleOptimizer):
    """``torch.optim`` shell of QNSGD: ``step(oracle)`` estimates the gradient at the current
    parameters with ``estimator`` at accuracy ``accuracy`` and takes one ℓ2-normalized step of
    length ``lr`` over all parameters jointly (the oracle sees them flattened)."""

    def __init__(self, params, lr: float, accuracy: float, estimator: HeavyTailedMean | MultivariateMean, seed: int = 0):
        check_real("lr", lr, low=0.0, low_open=True)
        check_real("accuracy", accuracy, low=0.0, low_open=True)
        if not isinstance(estimator, (HeavyTailedMean, MultivariateMean)):
            raise TypeError(f"estimator must be a HeavyTailedMean or a MultivariateMean, got {type(estimator).__name__}")
        self.estimator = estimator
        super().__init__(params, dict(lr=lr, accuracy=accuracy), seed)

    def _grad(self, oracle, x):
        acc = self.param_groups[0]["accuracy"]
        return self.estimator(oracle.at(x), eps=acc, rng=self.rng, counter=self.counter).estimate

    def _apply(self, ps, g):
        flat = torch.cat([p.detach().reshape(-1).double() for p in ps])
        nsgd_step([flat], [g], None, [L2()], lr=self.param_groups[0]["lr"], beta=0.0, weight_decay=0.0, nesterov=False)
        for p, v in zip(ps, self._split(ps, flat)):
            p.copy_(v)


class QPSGD(_OracleOptimizer):
    """``torch.optim`` shell of QPSGD: ``step(oracle)`` takes ``x ← Π(x − lr·g)`` with g from
    ``mlmc``; ``averaged()`` returns the running average of the iterates (flattened)."""

    def __init__(self, params, lr: float, domain, mlmc: UnbiasedMLMC, seed: int = 0):
        check_real("lr", lr, low=0.0, low_open=True)
        if not hasattr(domain, "project"):
            raise TypeError("domain must have a project(x) method (Ball, Box)")
        if not isinstance(mlmc, UnbiasedMLMC):
            raise TypeError(f"mlmc must be an UnbiasedMLMC, got {type(mlmc).__name__}")
        self.domain, self.mlmc = domain, mlmc
        super().__init__(params, dict(lr=lr), seed)
        self.state["avg"], self.state["t"] = None, 0

    def _grad(self, oracle, x):
        return self.mlmc(oracle.at(x), rng=self.rng, counter=self.counter).estimate

    def _apply(self, ps, g):
        flat = torch.cat([p.detach().reshape(-1).double() for p in ps]).numpy()
        x = self.domain.project(flat - self.param_groups[0]["lr"] * g.numpy())
        t = self.state["t"] + 1
        avg = x.copy() if self.state["avg"] is None else self.state["avg"] + (x - self.state["avg"]) / t
        self.state["avg"], self.state["t"] = avg, t
        for p, v in zip(ps, self._split(ps, torch.from_numpy(x))):
            p.copy_(v)

    def averaged(self) -> np.ndarray:
        if self.state["avg"] is None:
            raise RuntimeError("no step taken yet")
        return self.state["avg"].copy()
