"""Optimizers as controlled dynamical systems: the quadruple (metric, transition, direction, lift).

Every first-order optimizer here is one loop with four exchangeable parts, each a small
functional object (their contracts: :mod:`.base`):

* ``transition`` Φ, the internal memory (:mod:`.transitions`): ``init(p) -> state`` and
  ``update(g, state, step, out=None) -> memory``, pure without ``out``, in place into
  ``out``'s buffers with it (momenta, second moments).
* ``direction``, the direction field generator (:mod:`.directions`):
  ``(g, memory, step) -> velocity target``.
* ``metric`` g, how that target is measured and preconditioned (:mod:`.metrics`):
  ``(v, memory, step) -> update``.
* ``lift`` η, the time scale: the step size and where weight decay enters (coupled, added
  to the gradient before Φ sees it; or decoupled, shrinking the parameter before the step).

One step reads: ``g ← ∇f (+ λp if coupled)``; ``memory ← Φ(g)``; ``v ← direction(g, memory)``;
``u ← metric(v, memory)``; ``p ← p(1 − ηλ if decoupled) − η u``. :class:`Quadruple` bundles the
four parts as one init/update pair; the functional ``_quadruple_step`` runs that step over
a list of parameters.

:class:`QuadrupleOptimizer` is the ``torch.optim.Optimizer`` shell over it: ``lr`` and
``weight_decay`` live in ``param_groups`` (so schedulers and per-group settings work), the
memory in ``state`` (so ``state_dict`` round-trips). ``quadruple_sgd``, ``quadruple_adam`` and
``quadruple_adamw`` build the classical instances, which follow ``torch.optim.SGD``, ``Adam``
and ``AdamW``; ``quadruple_lion`` follows the Lion paper's update and ``quadruple_shampoo``
Gupta et al.'s Shampoo (:mod:`.instances`).
"""

from .base import Direction, Lift, Metric, Transition
from .directions import (AlignedMomentum, BiasCorrectedMomentum, Gradient, Interpolation, Memory, Momentum,
                         SignOfInterpolation)
from .instances import (quadruple_adam, quadruple_adamw, quadruple_aligned, quadruple_lion, quadruple_muon,
                        quadruple_sgd, quadruple_shampoo, quadruple_spectral, quadruple_tracking)
from .metrics import DiagonalAdaptive, Euclidean, KroneckerPreconditioner, NewtonSchulz, SpectralSteepest
from .optimizer import Quadruple, QuadrupleOptimizer
from .transitions import (EMAMomentum, HeavyBall, KroneckerFactors, LionMemory, Moments, NoMemory,
                          PreconditionedTracking)

__all__ = [
    "QuadrupleOptimizer", "Quadruple", "Lift", "Transition", "Direction", "Metric",
    "NoMemory", "HeavyBall", "Moments", "Gradient", "Momentum",
    "BiasCorrectedMomentum", "LionMemory", "SignOfInterpolation", "Euclidean", "DiagonalAdaptive",
    "KroneckerFactors", "KroneckerPreconditioner", "EMAMomentum", "PreconditionedTracking", "Interpolation",
    "Memory", "AlignedMomentum", "NewtonSchulz", "SpectralSteepest",
    "quadruple_sgd", "quadruple_adam", "quadruple_adamw", "quadruple_lion", "quadruple_shampoo", "quadruple_muon",
    "quadruple_spectral", "quadruple_tracking", "quadruple_aligned",
]
