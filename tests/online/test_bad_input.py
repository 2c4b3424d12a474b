"""Bad input to the public entry points of ``neurips26.online`` (issue 22, section 5).

Each probe feeds one entry point one class of bad input (NaN, inf, empty, wrong shape or dtype,
an out-of-range setting) and asserts the exception type and that the message names the argument.
``PROBES`` is a plain table so that the counts (clear / unclear / silent) can be taken from it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.online import (
    DFTRL, DOGD, QSGD, AcceleratedDFTRL, Ball, Box, CompressedDFTRL, CompressedDOGD, GossipMatrix, LeastSquaresLosses,
    LinearLosses, LogisticLosses, RandomK, Simplex, TopK, gossip_matrix, quadratic_min_on_ball, run_doco,
)

NAN, INF = float("nan"), float("inf")
T, N, D = 10, 4, 3


def _G(**put):
    G = np.random.default_rng(0).standard_normal((T, N, D))
    for index, value in put.items():
        G[tuple(int(c) for c in index.split("_")[1:])] = value
    return G


def _problem():
    return LinearLosses(_G())


def _net():
    return gossip_matrix("ring", N)


def _alg(**kw):
    return DFTRL(kw.pop("eta", 0.1), kw.pop("domain", Ball(1.0)))


def _ls(A=None, b=None):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((T, N, D)) if A is None else A
    b = rng.standard_normal((T, N)) if b is None else b
    return LeastSquaresLosses(A, b)


def _logistic(A=None, y=None, **kw):
    rng = np.random.default_rng(2)
    A = rng.standard_normal((T, N, D)) if A is None else A
    y = np.where(rng.random((T, N)) < 0.5, -1.0, 1.0) if y is None else y
    return LogisticLosses(A, y, **kw)


def _with(array, index, value):
    array = np.array(array, dtype=float)
    array[index] = value
    return array


def _nan_in_problem_after_construction():
    prob = _problem()
    prob.G[3, 1, 2] = NAN  # the data changed behind the constructor's back
    return run_doco(prob, _net(), _alg())


_half = np.full((2, 2), 0.5)
_cycle = 0.5 * np.eye(3) + 0.5 * np.roll(np.eye(3), 1, axis=1)  # doubly stochastic, not symmetric

# (id, call, exception, pattern the message must match: it names the argument)
PROBES = [
    # ------------------------------------------------------------ GossipMatrix
    ("gossip-not-symmetric", lambda: GossipMatrix(_cycle, "c"), ValueError, r"W.*not symmetric"),
    ("gossip-negative", lambda: GossipMatrix(np.array([[1.5, -0.5], [-0.5, 1.5]]), "n"), ValueError, r"W.*negative"),
    ("gossip-not-stochastic", lambda: GossipMatrix(np.array([[0.5, 0.2], [0.2, 0.5]]), "s"), ValueError,
     r"W.*doubly stochastic"),
    ("gossip-disconnected", lambda: GossipMatrix(np.block([[_half, 0 * _half], [0 * _half, _half]]), "d"), ValueError,
     r"W.*spectral gap.*connected"),
    ("gossip-periodic", lambda: GossipMatrix(np.array([[0.0, 1.0], [1.0, 0.0]]), "p"), ValueError, r"W.*spectral gap"),
    ("gossip-nan", lambda: GossipMatrix(_with(_half, (0, 1), NAN), "x"), ValueError, r"W.*NaN"),
    ("gossip-inf", lambda: GossipMatrix(_with(_half, (1, 1), INF), "x"), ValueError, r"W.*inf"),
    ("gossip-not-square", lambda: GossipMatrix(np.full((2, 3), 1 / 3), "x"), ValueError, r"W.*square"),
    ("gossip-1d", lambda: GossipMatrix(np.ones(3), "x"), ValueError, r"W.*square"),
    ("gossip-empty", lambda: GossipMatrix(np.zeros((0, 0)), "x"), ValueError, r"W.*empty"),
    ("gossip-complex", lambda: GossipMatrix(_half.astype(complex), "x"), TypeError, r"W.*real"),
    ("gossip-string", lambda: GossipMatrix("ring", "x"), TypeError, r"W.*real"),
    ("gossip-name", lambda: GossipMatrix(_half, 3), TypeError, r"name"),
    # ------------------------------------------------------------ gossip_matrix
    ("graph-n-float", lambda: gossip_matrix("ring", 2.5), TypeError, r"\bn\b.*integer"),
    ("graph-n-small", lambda: gossip_matrix("ring", 1), ValueError, r"\bn\b"),
    ("graph-adjacency-nan", lambda: gossip_matrix(_with(np.ones((3, 3)) - np.eye(3), (0, 1), NAN)), ValueError,
     r"adjacency.*NaN"),
    ("graph-adjacency-empty", lambda: gossip_matrix(np.zeros((0, 0))), ValueError, r"adjacency.*empty"),
    ("graph-weights", lambda: gossip_matrix("ring", 4, weights="uniform"), ValueError, r"weights"),
    ("graph-p-nan", lambda: gossip_matrix("erdos_renyi", 6, p=NAN), ValueError, r"\bp\b"),
    # ------------------------------------------------------------ domains
    ("ball-zero", lambda: Ball(0.0), ValueError, r"radius"),
    ("ball-negative", lambda: Ball(-1.0), ValueError, r"radius"),
    ("ball-nan", lambda: Ball(NAN), ValueError, r"radius"),
    ("ball-inf", lambda: Ball(INF), ValueError, r"radius"),
    ("ball-string", lambda: Ball("1"), TypeError, r"radius"),
    ("ball-shrink", lambda: Ball(1.0).shrink(1.5), ValueError, r"alpha"),
    ("box-reversed", lambda: Box(1.0, -1.0), ValueError, r"low.*high"),
    ("box-nan", lambda: Box(NAN, 1.0), ValueError, r"low"),
    ("box-infinite", lambda: Box(-INF, INF), ValueError, r"low"),
    ("simplex-zero", lambda: Simplex(0.0), ValueError, r"total"),
    ("simplex-nan", lambda: Simplex(NAN), ValueError, r"total"),
    # ------------------------------------------------------------ compressors
    ("topk-zero", lambda: TopK(0), ValueError, r"\bk\b"),
    ("topk-negative", lambda: TopK(-2), ValueError, r"\bk\b"),
    ("topk-float", lambda: TopK(2.5), TypeError, r"\bk\b.*integer"),
    ("topk-nan", lambda: TopK(NAN), TypeError, r"\bk\b.*integer"),
    ("topk-string", lambda: TopK("3"), TypeError, r"\bk\b.*integer"),
    ("topk-bool", lambda: TopK(True), TypeError, r"\bk\b.*integer"),
    ("topk-above-d", lambda: run_doco(_problem(), _net(), CompressedDFTRL(0.1, Ball(1.0), TopK(30))), ValueError,
     r"\bk\b.*\bd\b"),
    ("randomk-zero", lambda: RandomK(0), ValueError, r"\bk\b"),
    ("randomk-float", lambda: RandomK(1.5), TypeError, r"\bk\b.*integer"),
    ("randomk-above-d", lambda: run_doco(_problem(), _net(), CompressedDOGD(0.1, Ball(1.0), RandomK(4))), ValueError,
     r"\bk\b.*\bd\b"),
    ("qsgd-zero", lambda: QSGD(0), ValueError, r"\bs\b"),
    ("qsgd-float", lambda: QSGD(2.5), TypeError, r"\bs\b.*integer"),
    ("qsgd-nan", lambda: QSGD(NAN), TypeError, r"\bs\b.*integer"),
    ("qsgd-inf", lambda: QSGD(INF), TypeError, r"\bs\b.*integer"),
    # ------------------------------------------------------------ algorithms
    ("eta-inf", lambda: DFTRL(INF, Ball(1.0)), ValueError, r"eta"),
    ("eta-nan", lambda: DFTRL(NAN, Ball(1.0)), ValueError, r"eta"),
    ("eta-negative", lambda: DOGD(-0.1, Ball(1.0)), ValueError, r"eta"),
    ("eta-string", lambda: DFTRL("fast", Ball(1.0)), TypeError, r"eta"),
    ("eta-2d", lambda: DFTRL(np.ones((2, 2)), Ball(1.0)), ValueError, r"eta"),
    ("eta-empty", lambda: DFTRL(np.array([]), Ball(1.0)), ValueError, r"eta.*empty"),
    ("eta-batch-nan", lambda: DFTRL(np.array([0.1, NAN]), Ball(1.0)), ValueError, r"eta"),
    ("eta-inf-compressed", lambda: CompressedDOGD(INF, Ball(1.0), TopK(1)), ValueError, r"eta"),
    ("gamma-nan", lambda: CompressedDFTRL(0.1, Ball(1.0), TopK(1), gamma=NAN), ValueError, r"gamma"),
    ("gamma-zero", lambda: CompressedDFTRL(0.1, Ball(1.0), TopK(1), gamma=0.0), ValueError, r"gamma"),
    ("rounds-float", lambda: CompressedDFTRL(0.1, Ball(1.0), TopK(1), rounds=1.5), TypeError, r"rounds"),
    ("rounds-zero", lambda: CompressedDFTRL(0.1, Ball(1.0), TopK(1), rounds=0), ValueError, r"rounds"),
    ("rounds-accelerated", lambda: AcceleratedDFTRL(0.1, Ball(1.0), rounds=0), ValueError, r"rounds"),
    ("compressor-string", lambda: CompressedDFTRL(0.1, Ball(1.0), "top-k"), TypeError, r"compressor"),
    ("domain-none", lambda: DOGD(0.1, None), TypeError, r"domain"),
    # ------------------------------------------------------------ problems
    ("linear-nan", lambda: LinearLosses(_G(at_3_1_2=NAN)), ValueError, r"\bG\b.*NaN"),
    ("linear-inf", lambda: LinearLosses(_G(at_0_0_0=-INF)), ValueError, r"\bG\b.*inf"),
    ("linear-empty", lambda: LinearLosses(np.zeros((0, N, D))), ValueError, r"\bG\b.*empty"),
    ("linear-2d", lambda: LinearLosses(np.zeros((T, N))), ValueError, r"\bG\b.*\(T, n, d\)"),
    ("linear-string", lambda: LinearLosses("gradients"), TypeError, r"\bG\b"),
    ("linear-complex", lambda: LinearLosses(_G().astype(complex)), TypeError, r"\bG\b.*real"),
    ("lsq-A-nan", lambda: _ls(A=_with(np.ones((T, N, D)), (2, 2, 2), NAN)), ValueError, r"\bA\b.*NaN"),
    ("lsq-b-inf", lambda: _ls(b=_with(np.ones((T, N)), (1, 1), INF)), ValueError, r"\bb\b.*inf"),
    ("lsq-b-shape", lambda: _ls(b=np.ones((T, N + 1))), ValueError, r"\bb\b"),
    ("lsq-empty-d", lambda: _ls(A=np.zeros((T, N, 0))), ValueError, r"\bA\b.*empty"),
    ("logistic-y-nan", lambda: _logistic(y=_with(np.ones((T, N)), (0, 0), NAN)), ValueError, r"\by\b.*NaN"),
    ("logistic-A-inf", lambda: _logistic(A=_with(np.ones((T, N, D)), (0, 0, 0), INF)), ValueError, r"\bA\b.*inf"),
    ("logistic-y-labels", lambda: _logistic(y=np.zeros((T, N))), ValueError, r"\by\b"),
    ("logistic-iters-zero", lambda: _logistic(comparator_iters=0), ValueError, r"comparator_iters"),
    ("qmin-radius-negative", lambda: quadratic_min_on_ball(np.eye(2), np.ones(2), -1.0), ValueError, r"radius"),
    ("qmin-radius-nan", lambda: quadratic_min_on_ball(np.eye(2), np.ones(2), NAN), ValueError, r"radius"),
    ("qmin-H-nan", lambda: quadratic_min_on_ball(_with(np.eye(2), (0, 1), NAN), np.ones(2), 1.0), ValueError,
     r"\bH\b.*NaN"),
    ("qmin-shapes", lambda: quadratic_min_on_ball(np.eye(2), np.ones(3), 1.0), ValueError, r"\bc\b"),
    # ------------------------------------------------------------ run_doco
    ("checkpoints-empty", lambda: run_doco(_problem(), _net(), _alg(), checkpoints=[]), ValueError,
     r"checkpoints.*empty"),
    ("checkpoints-zero", lambda: run_doco(_problem(), _net(), _alg(), checkpoints=[0, 5]), ValueError, r"checkpoints"),
    ("checkpoints-beyond-T", lambda: run_doco(_problem(), _net(), _alg(), checkpoints=[T + 1]), ValueError,
     r"checkpoints"),
    ("checkpoints-fraction", lambda: run_doco(_problem(), _net(), _alg(), checkpoints=[2.5, 10]), ValueError,
     r"checkpoints.*whole"),
    ("checkpoints-nan", lambda: run_doco(_problem(), _net(), _alg(), checkpoints=[NAN]), ValueError,
     r"checkpoints.*NaN"),
    ("checkpoints-2d", lambda: run_doco(_problem(), _net(), _alg(), checkpoints=[[2, 4]]), ValueError,
     r"checkpoints.*1-d"),
    ("block-zero", lambda: run_doco(_problem(), _net(), _alg(), block=0), ValueError, r"block"),
    ("block-float", lambda: run_doco(_problem(), _net(), _alg(), block=2.5), TypeError, r"block.*integer"),
    ("delta-nan", lambda: run_doco(_problem(), _net(), _alg(), feedback="one-point", delta=NAN), ValueError,
     r"delta"),
    ("feedback", lambda: run_doco(_problem(), _net(), _alg(), feedback="bandit"), ValueError, r"feedback"),
    ("nodes-mismatch", lambda: run_doco(_problem(), gossip_matrix("ring", N + 1), _alg()), ValueError, r"nodes"),
    ("network-array", lambda: run_doco(_problem(), _net().W, _alg()), TypeError, r"network.*GossipMatrix"),
    ("algorithm-none", lambda: run_doco(_problem(), _net(), None), TypeError, r"algorithm"),
    ("problem-none", lambda: run_doco(None, _net(), _alg()), TypeError, r"problem"),
    ("seed-negative", lambda: run_doco(_problem(), _net(), _alg(), seed=-1), ValueError, r"seed"),
    ("problem-data-nan", _nan_in_problem_after_construction, ValueError, r"problem\.G.*NaN"),
]


@pytest.mark.parametrize("call, exc, match", [pytest.param(c, e, m, id=i) for i, c, e, m in PROBES])
def test_bad_input_is_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_probe_ids_are_unique():
    ids = [p[0] for p in PROBES]
    assert len(ids) == len(set(ids))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_run_that_diverges_says_so():
    """Non-finite losses met while playing (a step size far too large on unbounded losses) are a
    FloatingPointError naming the cause, not NaN regret."""
    prob = LinearLosses(np.full((T, N, D), 1e300))
    with pytest.raises(FloatingPointError, match="non-finite"):
        run_doco(prob, _net(), DOGD(1e300, Box(-1e300, 1e300)), checkpoints=[T])


# ------------------------------------------------------------ properties over spaces of inputs
@settings(max_examples=60, deadline=None)
@given(k=st.one_of(st.integers(max_value=0), st.floats(allow_nan=True, allow_infinity=True)
                   .filter(lambda v: not (v == int(v) if np.isfinite(v) else False))))
def test_topk_and_randomk_refuse_every_k_that_is_not_a_positive_integer(k):
    for cls in (TopK, RandomK):
        with pytest.raises((TypeError, ValueError), match=r"\bk\b"):
            cls(k)


@settings(max_examples=60, deadline=None)
@given(r=st.one_of(st.floats(max_value=0.0), st.just(NAN), st.just(INF)))
def test_ball_refuses_every_radius_that_is_not_positive_and_finite(r):
    with pytest.raises(ValueError, match="radius"):
        Ball(r)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(2, 6), seed=st.integers(0, 10**6), scale=st.sampled_from([0.0, 1e-6, 1e-3, 0.1, 1.0]))
def test_gossip_matrix_accepts_exactly_the_valid_mixing_matrices(n, seed, scale):
    """A Metropolis matrix perturbed at random: accepted iff it is still symmetric, non-negative,
    doubly stochastic and connected (to the tolerance); otherwise the error names the property."""
    rng = np.random.default_rng(seed)
    W = gossip_matrix("complete", n).W + scale * rng.standard_normal((n, n))
    tol = 1e-9
    valid = (np.abs(W - W.T).max() <= tol and W.min() >= -tol and np.abs(W.sum(1) - 1).max() <= tol)
    if valid:
        assert GossipMatrix(W, "w").spectral_gap > 0
    else:
        with pytest.raises(ValueError, match=r"W (is not symmetric|has negative|is not doubly stochastic)"):
            GossipMatrix(W, "w")


@settings(max_examples=40, deadline=None)
@given(points=st.lists(st.one_of(st.integers(-3, 2 * T), st.floats(allow_nan=True, allow_infinity=True)), max_size=4))
def test_run_doco_checkpoints_are_whole_rounds_in_range_or_refused(points):
    ok = len(points) > 0 and all(np.isfinite(p) and p == int(p) and 1 <= p <= T for p in points)
    if ok:
        res = run_doco(_problem(), _net(), _alg(), checkpoints=points)
        assert list(res.checkpoints) == sorted(set(int(p) for p in points))
    else:
        with pytest.raises(ValueError, match="checkpoints"):
            run_doco(_problem(), _net(), _alg(), checkpoints=points)
