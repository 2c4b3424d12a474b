"""Latent-space Bayesian optimization (LSBO) over structured objects through a VAE.

The VAE and the codec between objects and latent posteriors (``SequenceVAE``, ``TokenCodec``,
``train_vae``) are in ``neurips26.bayesopt.vae``; this module holds the loop:

* ``LatentSpaceBO``: the loop of LOL-BO's shape: a GP surrogate over encoder posteriors, a
  trust region around the incumbent (TuRBO's success/failure rule), candidates from TuRBO's
  box, the first-order geodesic (Mahalanobis) ball of the encoder's Fisher metric, or an
  isotropic ball (``geometry``), decoded and re-encoded so that each candidate enters the
  kernel as the posterior of the object it decodes to; batch Thompson sampling on the
  candidates; the objective (a plain callable on objects) evaluated on the decoded objects;
  every ``finetune_every`` steps the VAE is fine-tuned on the best objects and all data are
  re-encoded.

Surrogates (``kernel=``): ``"marginalized"`` (``MarginalizedQuadraticKernel`` on [m, diag S]),
``"expected-rbf"`` (``ExpectedRBFKernel``, the RBF averaged over both posteriors) and
``"rbf"`` (a plain RBF on the means), each inside a ``ScaleKernel``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import Tensor

from ._checks import check_int, check_real
from ._gp import fit_gp
from .geometry import isotropic_ball, mahalanobis_ball, trust_region_box
from .vae import TokenCodec, train_vae

__all__ = ["LatentSpaceBO", "LSBOResult", "make_surrogate"]


def make_surrogate(kind: str, X: Tensor, Y: Tensor, latent_dim: int, lengthscale_init: float | None = None,
                   state: dict | None = None, maxiter: int = 200):
    """A SingleTaskGP on inputs [m, diag S] (n, 2d) with the ``kind`` kernel in a ScaleKernel;
    outcomes standardized; hyperparameters by marginal likelihood (L-BFGS-B, at most
    ``maxiter`` steps), warm-started from ``state`` (a previous surrogate's state_dict)."""
    from gpytorch.kernels import RBFKernel, ScaleKernel

    from .marginalized_kernel import ExpectedRBFKernel, MarginalizedQuadraticKernel

    d = latent_dim
    if kind == "marginalized":
        base = MarginalizedQuadraticKernel(covariance="diag", latent_dims=d)
    elif kind == "expected-rbf":
        base = ExpectedRBFKernel(latent_dims=d)
    elif kind == "rbf":
        base = RBFKernel(ard_num_dims=d, active_dims=torch.arange(d))
    else:
        raise ValueError(f"kernel must be 'marginalized', 'expected-rbf' or 'rbf', got {kind!r}")
    if lengthscale_init is not None and kind != "marginalized":
        base.lengthscale = lengthscale_init
    # no input transform: the kernels read S as the variance of m, which rescaling each column apart would break
    return fit_gp(X, Y, normalize=False, covar_module=ScaleKernel(base), state=state,
                  optimizer_kwargs={"options": {"maxiter": maxiter}})


@dataclass
class LSBOResult:
    objects: list  # every evaluated object, in order
    scores: list  # their objective values
    n_invalid: int  # candidates whose decode or evaluation was invalid
    n_duplicates: int  # decoded candidates already evaluated
    n_proposed: int
    best_curve: list = field(default_factory=list)  # best score after each batch
    # objective calls after the initial design: below the budget when the run stopped early
    # (nothing new decoded around ``moves + 1`` centres in a row, ten rounds each up to the largest trust region)
    n_evaluations: int = 0

    @property
    def best(self):
        i = max(range(len(self.scores)), key=self.scores.__getitem__)
        return self.objects[i], self.scores[i]

    def top_k_mean(self, k: int = 10) -> float:
        top = sorted(self.scores, reverse=True)[:k]
        return sum(top) / len(top)


class LatentSpaceBO:
    """LSBO over ``codec`` maximizing ``objective(obj) -> float`` (None, NaN or an exception
    mark an invalid object: counted, never fatal).

    ``kernel``: "marginalized" | "expected-rbf" | "rbf"; ``sampler``: "turbo" (box),
    "geometry" (Mahalanobis ball of G = diag(S_best)⁻¹ normalized to unit determinant, radius
    half the box side, inside the box) or "isotropic". The trust region starts at side
    ``length_init`` (in units of the latent prior's sd), doubles after 3 successes, halves
    after ``max(4, d // batch)`` failures, and restarts at the incumbent when below ``length_min``.

    When ten rounds in a row decode nothing new around the centre, even at ``length_max``, that
    object's neighbourhood is exhausted: the trust region moves to the best object not yet exhausted
    (side ``length_init``), up to ``moves`` times in a row without an evaluation (default 0: stop at
    once). The run stops early, with ``n_evaluations`` below the budget, when those moves are spent or
    every object is exhausted. ``moves=10`` made the quick run's geometry-sampled molecule runs spend
    their budget (26-40 of 40 evaluations instead of 5) and find better molecules, but cost four times
    the time (``results/cpu/lsbo-moves10-quick.json``), so it is not the default."""

    def __init__(self, codec: TokenCodec, objective: Callable, kernel: str = "marginalized", sampler: str = "turbo",
                 batch_size: int = 10, n_candidates: int = 256, finetune_every: int = 0, finetune_epochs: int = 2,
                 length_init: float = 1.6, length_min: float = 0.05, length_max: float = 3.2,
                 lengthscale_init: float | None = None, seed: int = 0, moves: int = 0):
        if sampler not in ("turbo", "geometry", "isotropic"):
            raise ValueError(f"sampler must be 'turbo', 'geometry' or 'isotropic', got {sampler!r}")
        if kernel not in ("marginalized", "expected-rbf", "rbf"):
            raise ValueError(f"kernel must be 'marginalized', 'expected-rbf' or 'rbf', got {kernel!r}")
        if not callable(objective):
            raise TypeError(f"objective must be callable (object -> float), got {type(objective).__name__}")
        batch_size = check_int("batch_size", batch_size, 1)
        n_candidates = check_int("n_candidates", n_candidates, 1)
        finetune_every = check_int("finetune_every", finetune_every, 0)
        finetune_epochs = check_int("finetune_epochs", finetune_epochs, 0)
        for name, value in (("length_init", length_init), ("length_min", length_min), ("length_max", length_max)):
            check_real(name, value, low=0.0, low_open=True)
        if not length_min <= length_init <= length_max:
            raise ValueError(f"need length_min <= length_init <= length_max, got length_min={length_min}, "
                             f"length_init={length_init}, length_max={length_max}")
        if lengthscale_init is not None:
            check_real("lengthscale_init", lengthscale_init, low=0.0, low_open=True)
        self.codec, self.objective, self.kernel, self.sampler = codec, objective, kernel, sampler
        self.batch_size, self.n_candidates = batch_size, n_candidates
        self.finetune_every, self.finetune_epochs = finetune_every, finetune_epochs
        self.length_init, self.length_min, self.length_max = length_init, length_min, length_max
        self.lengthscale_init = lengthscale_init
        self.generator = torch.Generator().manual_seed(seed)
        self.seed = seed
        self.moves = check_int("moves", moves, 0)

    def _score(self, obj) -> float | None:
        if obj is None:
            return None
        try:
            y = self.objective(obj)
        except Exception:  # noqa: BLE001 - an objective that fails on an object marks it invalid
            return None
        if y is None or not math.isfinite(float(y)):
            return None
        return float(y)

    def _candidates(self, center: Tensor, center_var: Tensor, length: float) -> Tensor:
        d = len(center)
        lo, hi = center - length / 2, center + length / 2
        n, generator = self.n_candidates, self.generator
        if self.sampler == "turbo":
            return trust_region_box(center, torch.full((d,), length, dtype=center.dtype), n, lo, hi, generator)
        if self.sampler == "isotropic":
            return isotropic_ball(center, length / 2, n, lo, hi, generator)
        metric = torch.diag(1.0 / center_var)
        metric = metric / torch.exp(torch.log(torch.diag(metric)).mean())  # unit determinant: same volume scale
        return mahalanobis_ball(center, metric, length / 2, n, lo, hi, generator)

    def run(self, init_objects: Sequence, budget: int, progress: Callable[[int, float], None] | None = None) -> LSBOResult:
        """Evaluate ``init_objects``, then ``budget`` more objective calls chosen by BO."""
        budget = check_int("budget", budget, 0)
        objects, scores = [], []
        n_invalid = 0
        for obj in init_objects:
            y = self._score(obj)
            if y is None:
                n_invalid += 1
            else:
                objects.append(obj)
                scores.append(y)
        if len(objects) < 2:
            raise ValueError("need at least two valid initial objects with finite scores")
        seen = set(map(self._key, objects))
        m, v = self.codec.encode(objects)
        length, succ, fail = self.length_init, 0, 0
        fail_tol = max(4, math.ceil(self.codec.latent_dim / self.batch_size))
        used, n_dup, n_prop, step, stalls, moved = 0, 0, 0, 0, 0, 0
        exhausted: set[int] = set()  # objects around which nothing new decodes, even at length_max
        state = None  # the previous surrogate's hyperparameters: each fit starts from them
        curve = [max(scores)]
        while used < budget:
            step += 1
            if self.finetune_every and step % self.finetune_every == 0:
                self._finetune(objects, scores)
                m, v = self.codec.encode(objects)
            Y = torch.tensor(scores, dtype=torch.float64)
            open_ = Y.clone()
            open_[list(exhausted)] = -torch.inf
            best = int(open_.argmax())  # the incumbent, or the best object whose neighbourhood is not exhausted
            z = self._candidates(m[best], v[best], length)
            decoded = self.codec.decode(z)
            n_prop += len(decoded)
            fresh, keys = [], set()
            for obj in decoded:
                if obj is None:
                    n_invalid += 1
                    continue
                k = self._key(obj)
                if k in seen or k in keys:
                    n_dup += 1
                    continue
                if not self.codec.fits(obj):
                    n_invalid += 1
                    continue
                keys.add(k)
                fresh.append(obj)
            q = min(self.batch_size, budget - used)
            if not fresh:  # the region decodes only to known objects: widen it
                stalls += 1
                length = min(2 * length, self.length_max)
                if stalls >= 10:  # nothing new decodes anywhere near this centre: move on, or stop rather than spin
                    exhausted.add(best)
                    if moved >= self.moves or len(exhausted) >= len(objects):
                        break
                    moved, stalls, length = moved + 1, 0, self.length_init
                continue
            stalls, moved = 0, 0
            model = make_surrogate(self.kernel, torch.cat([m, v], -1), Y, self.codec.latent_dim,
                                   self.lengthscale_init, state=state)
            state = model.state_dict()
            cm, cv = self.codec.encode(fresh)
            with torch.no_grad():
                samples = model.posterior(torch.cat([cm, cv], -1)).rsample(torch.Size([q]))[..., 0]  # (q, N)
            chosen = []
            for s in samples:  # batch Thompson sampling without repeats
                s = s.clone()
                s[chosen] = -float("inf")
                chosen.append(int(s.argmax()))
                if len(chosen) == len(fresh):
                    break
            batch_best = -float("inf")
            for i in chosen:
                obj = fresh[i]
                seen.add(self._key(obj))
                y = self._score(obj)
                used += 1
                if y is None:
                    n_invalid += 1
                    continue
                objects.append(obj)
                scores.append(y)
                m = torch.cat([m, cm[i:i + 1]])
                v = torch.cat([v, cv[i:i + 1]])
                batch_best = max(batch_best, y)
            if batch_best > curve[-1] + 1e-3 * abs(curve[-1]):
                succ, fail = succ + 1, 0
            else:
                succ, fail = 0, fail + 1
            if succ >= 3:
                length, succ = min(2 * length, self.length_max), 0
            if fail >= fail_tol:
                length, fail = length / 2, 0
            if length < self.length_min:
                length = self.length_init
            curve.append(max(scores))
            if progress:
                progress(used, curve[-1])
        return LSBOResult(objects, scores, n_invalid, n_dup, n_prop, curve, used)

    def _finetune(self, objects, scores):
        """LOL-BO-style: fine-tune the VAE on the evaluated objects, weighted towards the best
        (rank weights ∝ 1 / (k·N + rank))."""
        Y = torch.tensor(scores)
        ranks = torch.empty_like(Y)
        ranks[Y.argsort(descending=True)] = torch.arange(len(Y), dtype=Y.dtype)
        weights = 1.0 / (1e-2 * len(Y) + ranks)
        train_vae(self.codec.vae, self.codec.tensorize(objects), epochs=self.finetune_epochs, lr=5e-4,
                  weights=weights, seed=self.seed)

    @staticmethod
    def _key(obj):
        return obj if isinstance(obj, (str, int, float, tuple)) else repr(obj)
