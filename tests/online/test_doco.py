import math

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import minimize

from neurips26.online import (
    DFTRL, DOGD, QSGD, Ball, Box, CompressedDFTRL, CompressedDOGD, Identity, LeastSquaresLosses,
    LinearLosses, RandomK, ScaledSign, Simplex, TopK, choco_gossip, gossip_matrix, quadratic_min_on_ball, run_doco,
)

COMPRESSORS = [Identity(), TopK(2), RandomK(3), ScaledSign(), QSGD(4)]


# ---------------------------------------------------------------- networks
@pytest.mark.parametrize("graph", ["ring", "grid", "erdos_renyi", "complete"])
def test_gossip_matrix_is_symmetric_doubly_stochastic(graph):
    g = gossip_matrix(graph, 12, seed=1) if graph == "erdos_renyi" else gossip_matrix(graph, 12)
    W = g.W
    np.testing.assert_allclose(W, W.T, atol=1e-15)
    np.testing.assert_allclose(W.sum(1), 1, atol=1e-12)
    assert (W >= -1e-15).all()
    assert 0 < g.spectral_gap <= 1


def test_spectral_gap_closed_forms():
    # Ring with Metropolis weights: W = I/3 + (S + S^T)/3, eigenvalues (1 + 2 cos(2πk/n))/3.
    n = 10
    lam = (1 + 2 * np.cos(2 * np.pi * np.arange(n) / n)) / 3
    expected = 1 - np.sort(np.abs(lam))[::-1][1]
    assert gossip_matrix("ring", n).spectral_gap == pytest.approx(expected, abs=1e-12)
    # Complete graph: W = 11^T/n, gap 1.
    assert gossip_matrix("complete", 7).spectral_gap == pytest.approx(1.0, abs=1e-12)


def test_networkx_graph_and_errors():
    g = gossip_matrix(nx.path_graph(5))
    assert g.n == 5
    with pytest.raises(ValueError, match="not connected"):
        gossip_matrix(nx.Graph([(0, 1), (2, 3)]))
    with pytest.raises(ValueError, match="unknown graph"):
        gossip_matrix("torus", 9)


# ------------------------------------------------------------- compressors
@pytest.mark.parametrize("q", COMPRESSORS, ids=lambda q: q.name)
def test_compressor_contraction_in_expectation(q):
    rng = np.random.default_rng(0)
    d = 20
    x = rng.standard_normal((4000, d)) * rng.exponential(1, (4000, 1))
    err = ((q(x, rng) - x) ** 2).sum(1)
    bound = (1 - q.omega(d)) * (x**2).sum(1)
    # Deterministic ones per sample; stochastic ones in expectation (mean over 4000 rows).
    assert err.mean() <= bound.mean() * (1 + 1e-9)
    if q.name in ("identity", "top-k", "scaled-sign"):
        assert (err <= bound + 1e-9).all()


def test_topk_and_bits():
    x = np.array([[0.1, -3.0, 2.0, 0.5]])
    np.testing.assert_array_equal(TopK(2)(x, None), [[0, -3.0, 2.0, 0]])
    assert Identity().bits(100) == 3200
    assert TopK(10).bits(100) == 10 * (32 + 7)
    assert ScaledSign().bits(100) == 132
    assert QSGD(4).bits(100) == 32 + 100 * (1 + 3)
    with pytest.raises(ValueError, match="k must be"):
        TopK(30)(np.zeros((1, 20)), None)


# --------------------------------------------------------------- domains
def test_projections_against_scipy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 6)) * 3
    for dom in (Ball(1.5), Box(-0.5, 1.0), Simplex(2.0)):
        p = dom.project(x)
        for i in range(len(x)):
            cons = []
            bounds = None
            if isinstance(dom, Ball):
                cons = [{"type": "ineq", "fun": lambda y: dom.radius**2 - y @ y}]
            elif isinstance(dom, Box):
                bounds = [(dom.low, dom.high)] * 6
            else:
                cons = [{"type": "eq", "fun": lambda y: y.sum() - dom.total}]
                bounds = [(0, None)] * 6
            ref = minimize(lambda y: ((y - x[i]) ** 2).sum(), np.zeros(6) + 0.1, constraints=cons, bounds=bounds,
                           method="SLSQP", options={"ftol": 1e-14, "maxiter": 500}).x
            np.testing.assert_allclose(p[i], ref, atol=1e-5)


def test_quadratic_min_on_ball_against_scipy():
    rng = np.random.default_rng(2)
    for radius in (0.3, 5.0):
        A = rng.standard_normal((30, 4))
        H, c = A.T @ A, A.T @ rng.standard_normal(30) * 3
        x = quadratic_min_on_ball(H, c, radius)
        ref = minimize(lambda y: 0.5 * y @ H @ y - c @ y, np.zeros(4), method="SLSQP",
                       constraints=[{"type": "ineq", "fun": lambda y: radius**2 - y @ y}],
                       options={"ftol": 1e-15, "maxiter": 1000}).x
        np.testing.assert_allclose(x, ref, atol=1e-5)


# ------------------------------------------------------------ algorithms
def _ls_problem(T=60, n=8, d=6, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((T, n, d))
    x_star = rng.standard_normal(d) * 0.5
    b = np.einsum("tnd,d->tn", A, x_star) + 0.1 * rng.standard_normal((T, n))
    return LeastSquaresLosses(A, b)


@pytest.mark.parametrize("feedback", ["full", "one-point"])
def test_identity_compression_reduces_exactly_to_uncompressed(feedback):
    prob, net, dom = _ls_problem(), gossip_matrix("ring", 8), Ball(1.0)
    kw = dict(feedback=feedback, checkpoints=[20, 40, 60], seed=3, delta=0.2)
    a = run_doco(prob, net, CompressedDFTRL(0.05, dom, Identity(), gamma=1.0), **kw)
    b = run_doco(prob, net, DFTRL(0.05, dom), **kw)
    np.testing.assert_allclose(a.cum_network_loss, b.cum_network_loss, rtol=1e-12, atol=1e-12)
    c = run_doco(prob, net, CompressedDOGD(0.05, dom, Identity(), gamma=1.0), **kw)
    e = run_doco(prob, net, DOGD(0.05, dom), **kw)
    np.testing.assert_allclose(c.cum_network_loss, e.cum_network_loss, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("q", COMPRESSORS, ids=lambda q: q.name)
@pytest.mark.parametrize("block", [1, 4])
def test_dual_sum_equals_gradient_sum(q, block):
    prob, net = _ls_problem(), gossip_matrix("grid", 8)
    res = run_doco(prob, net, CompressedDFTRL(0.05, Ball(1.0), q, gamma=0.3), block=block, seed=1)
    np.testing.assert_allclose(res.final_z_sum, res.grad_sum, atol=1e-9, rtol=0)


def test_choco_consensus_contracts_at_predicted_rate():
    rng = np.random.default_rng(0)
    net = gossip_matrix("ring", 10)
    W, delta = net.W, net.spectral_gap
    x0 = rng.standard_normal((10, 20))
    mean = x0.mean(0)

    # Exact gossip with gamma = 1: ||x_t - mean|| <= (1 - delta)^t ||x_0 - mean||.
    x, xh = x0.copy(), np.zeros_like(x0)
    for t in range(1, 40):
        x, xh = choco_gossip(x, xh, W, Identity(), 1.0, rng)
        assert np.linalg.norm(x - mean) <= (1 - delta) ** t * np.linalg.norm(x0 - mean) + 1e-12

    # Top-k with the step size of Koloskova et al. (2019, Thm 2): the Lyapunov error
    # ||X - X̄||² + ||X - X̂||² contracts at least by (1 - δ²ω/82) per round.
    q = TopK(4)
    omega = q.omega(20)
    beta = np.linalg.norm(np.eye(10) - W, 2)
    gamma = delta**2 * omega / (16 * delta + delta**2 + 4 * beta**2 + 2 * delta * beta**2 - 8 * delta * omega)
    rate = 1 - delta**2 * omega / 82
    x, xh = x0.copy(), np.zeros_like(x0)
    e0 = np.linalg.norm(x - mean) ** 2 + np.linalg.norm(x - xh) ** 2
    for t in range(1, 300):
        x, xh = choco_gossip(x, xh, W, q, gamma, rng)
        np.testing.assert_allclose(x.mean(0), mean, atol=1e-12)  # the average is preserved
        e = np.linalg.norm(x - mean) ** 2 + np.linalg.norm(x - xh) ** 2
        assert e <= rate**t * e0 * (1 + 1e-9)


def test_regret_on_a_fixed_linear_sequence_by_hand():
    # Two nodes, complete graph (W = all 1/2), d = 1, domain [-1, 1], eta = 1.
    # Gradients g_t = (g_{t,1}, g_{t,2}): (1, 3), (-2, 0), (1, 1).
    G = np.array([[[1.0], [3.0]], [[-2.0], [0.0]], [[1.0], [1.0]]])
    prob, net = LinearLosses(G), gossip_matrix("complete", 2)
    res = run_doco(prob, net, DFTRL(1.0, Ball(1.0)), checkpoints=[1, 2, 3])
    # D-FTRL: z_1 = W(0 + g_1) = (2, 2) -> x_2 = clip(-2) = -1 for both nodes;
    # z_2 = W(z_1 + g_2) = (1, 1) -> x_3 = -1; x_1 = 0.
    # Network losses: t=1: 4 * 0 = 0; t=2: (-2) * (-1) = 2; t=3: 2 * (-1) = -2.
    np.testing.assert_allclose(res.cum_network_loss[:, 0], [0.0, 2.0, 0.0])
    # Best fixed point: sums 4, 2, 4 -> x = -1 gives -4, -2, -4.
    np.testing.assert_allclose(res.regret, [4.0, 4.0, 4.0])


def test_least_squares_comparator_and_bits():
    prob, net = _ls_problem(T=30, n=4, d=3), gossip_matrix("ring", 4)
    res = run_doco(prob, net, CompressedDFTRL(0.1, Ball(2.0), TopK(1), gamma=0.5), block=3, checkpoints=[30])
    assert res.final_bits == 10 * TopK(1).bits(3)  # one message per block
    # Brute force the comparator on a grid inside the ball.
    g = np.linspace(-2, 2, 41)
    pts = np.array(np.meshgrid(g, g, g)).reshape(3, -1).T
    pts = pts[(pts**2).sum(1) <= 4]
    tot = sum(0.5 * ((prob.A[t] @ pts.T - prob.b[t][:, None]) ** 2).sum(0) for t in range(30))
    assert prob.best_fixed(30, Ball(2.0)) <= tot.min() + 1e-9
    assert prob.best_fixed(30, Ball(2.0)) >= tot.min() - 5.0  # grid resolution


def test_bandit_plays_stay_feasible_and_errors():
    prob, net = _ls_problem(), gossip_matrix("ring", 8)
    with pytest.raises(ValueError, match="delta"):
        run_doco(prob, net, DFTRL(0.1, Ball(1.0)), feedback="one-point", delta=2.0)
    with pytest.raises(ValueError, match="nodes"):
        run_doco(prob, gossip_matrix("ring", 5), DFTRL(0.1, Ball(1.0)))
    with pytest.raises(ValueError, match="eta"):
        DFTRL(0.0, Ball(1.0))
    with pytest.raises(ValueError, match="gamma"):
        CompressedDFTRL(0.1, Ball(1.0), TopK(1), gamma=1.5)


def test_batched_hyperparameters_equal_separate_runs():
    prob, net, dom = _ls_problem(), gossip_matrix("ring", 8), Ball(1.0)
    etas, gammas = np.array([0.02, 0.05, 0.1]), np.array([0.3, 0.6, 1.0])
    for make in (lambda e, g: CompressedDFTRL(e, dom, TopK(2), gamma=g), lambda e, g: CompressedDOGD(e, dom, TopK(2), gamma=g)):
        batched = run_doco(prob, net, make(etas, gammas), checkpoints=[30, 60])
        for i in range(3):
            single = run_doco(prob, net, make(float(etas[i]), float(gammas[i])), checkpoints=[30, 60])
            np.testing.assert_allclose(batched.regret[:, i], single.regret, rtol=1e-12, atol=1e-10)
    with pytest.raises(ValueError, match="eta must be > 0"):
        DFTRL(np.array([0.1, -1.0]), dom)


def test_logistic_losses_gradient_and_comparator():
    from neurips26.online import LogisticLosses

    rng = np.random.default_rng(5)
    T, n, d = 20, 3, 4
    A = rng.standard_normal((T, n, d))
    y = np.where(A @ np.array([2.0, -1.0, 0.5, 0.0]) + 0.3 * rng.standard_normal((T, n)) > 0, 1.0, -1.0)
    prob = LogisticLosses(A, y)
    X = rng.standard_normal((n, d)) * 0.3
    # Gradient against central finite differences.
    eps = 1e-6
    g = prob.grad(0, X)
    for j in range(d):
        e = np.zeros((n, d))
        e[:, j] = eps
        np.testing.assert_allclose(g[:, j], (prob.value(0, X + e) - prob.value(0, X - e)) / (2 * eps), atol=1e-8)
    # network_value: node j's point on every node's loss.
    manual = [sum(np.log1p(np.exp(-y[0, i] * A[0, i] @ X[j])) for i in range(n)) for j in range(n)]
    np.testing.assert_allclose(prob.network_value(0, X), manual, rtol=1e-12)
    # Comparator against scipy on the ball of radius 1 (the constraint is active here).
    Z = (A * y[..., None]).reshape(-1, d)
    ref = minimize(lambda x: np.logaddexp(0, -Z @ x).sum(), np.zeros(d), method="SLSQP",
                   constraints=[{"type": "ineq", "fun": lambda x: 1 - x @ x}], options={"ftol": 1e-14, "maxiter": 500})
    assert prob.best_fixed(T, Ball(1.0)) == pytest.approx(ref.fun, abs=1e-6)
    with pytest.raises(ValueError, match="labels"):
        LogisticLosses(A, np.zeros((T, n)))


def test_accelerated_gossip_preserves_average_and_beats_plain_gossip():
    from neurips26.online import AcceleratedDFTRL, accelerated_gossip
    from neurips26.online import acceleration_theta

    net = gossip_matrix("ring", 30)
    W = net.W
    x = np.random.default_rng(0).standard_normal((30, 4))
    mean = x.mean(0)
    theta = acceleration_theta(W)
    K = 40
    acc = accelerated_gossip(x, W, K, theta)
    plain = np.linalg.matrix_power(W, K) @ x
    np.testing.assert_allclose(acc.mean(0), mean, atol=1e-12)
    assert np.linalg.norm(acc - mean) < 0.5 * np.linalg.norm(plain - mean)
    # One round is one plain gossip step, so rounds=1 is exactly D-FTRL.
    np.testing.assert_allclose(accelerated_gossip(x, W, 1, theta), W @ x, atol=1e-15)
    prob = _ls_problem()
    net8 = gossip_matrix("ring", 8)
    a = run_doco(prob, net8, AcceleratedDFTRL(0.05, Ball(1.0), rounds=1), checkpoints=[60])
    b = run_doco(prob, net8, DFTRL(0.05, Ball(1.0)), checkpoints=[60])
    np.testing.assert_allclose(a.cum_network_loss, b.cum_network_loss, rtol=1e-12)
    c = run_doco(prob, net8, AcceleratedDFTRL(0.05, Ball(1.0)), block=5)
    np.testing.assert_allclose(c.final_z_sum, c.grad_sum, atol=1e-9)
    assert c.final_bits == 12 * math.ceil(1 / math.sqrt(net8.spectral_gap)) * Identity().bits(6)


def test_least_squares_comparator_on_a_box_against_scipy():
    prob = _ls_problem(T=40, n=3, d=4, seed=7)
    H, c = prob._H[40], prob._c[40]
    ref = minimize(lambda y: 0.5 * y @ H @ y - c @ y, np.zeros(4), method="L-BFGS-B", bounds=[(-0.2, 0.2)] * 4,
                   options={"ftol": 1e-15, "gtol": 1e-12}).fun + 0.5 * prob._bb[40]
    assert prob.best_fixed(40, Box(-0.2, 0.2)) == pytest.approx(ref, abs=1e-6)


@pytest.mark.parametrize("make", [
    lambda dom: DFTRL(0.05, dom), lambda dom: DOGD(0.05, dom),
    lambda dom: CompressedDFTRL(0.05, dom, TopK(2), gamma=0.5, rounds=2),
    lambda dom: CompressedDOGD(0.05, dom, QSGD(4), gamma=0.5),
], ids=["D-FTRL", "D-OGD", "C-DFTRL", "C-DOGD"])
def test_update_returns_a_new_state_and_leaves_the_old_one(make):
    from neurips26.online import AcceleratedDFTRL

    for alg in (make(Ball(1.0)), AcceleratedDFTRL(0.05, Ball(1.0), rounds=3)):
        net = gossip_matrix("ring", 8)
        state = alg.init(8, 6, net.W)
        g = np.random.default_rng(0).standard_normal((8, 6))
        state, _ = alg.update(state, g, net.W, np.random.default_rng(1))
        before = [np.array(v, copy=True) for v in state]
        a, rounds = alg.update(state, g, net.W, np.random.default_rng(2))
        b, _ = alg.update(state, g, net.W, np.random.default_rng(2))
        assert all(np.array_equal(v, w) for v, w in zip(state, before))  # the old state is untouched
        assert all(np.array_equal(v, w) for v, w in zip(a, b))  # same state and rng: same new state
        assert type(a) is type(state) and rounds >= 1 and alg.decide(a).shape == (8, 6)
