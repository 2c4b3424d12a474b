"""DAG-flow path following: with no acyclicity term it is each column's lasso path
(scikit-learn's lars_path, breakpoints and coefficients to 1e-8); with one, stationarity
holds at every knot, a fixed-support stretch matches re-solving from scratch, an independent
L-BFGS-B solve started at a path point stays there, and events sit where their conditions hold."""

import numpy as np
from threadpoolctl import threadpool_limits
import pytest
from scipy.optimize import minimize
from sklearn.linear_model import lars_path

from neurips26.causal import DagmaObjective, NotearsObjective, follow_path, is_acyclic, local_minimum
from neurips26.causal.path import _orthant_newton


def sem_data(n=120, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] += 0.8 * X[:, 0]
    X[:, 3] += 0.5 * X[:, 1] - 0.7 * X[:, 2]
    X[:, 4] += 0.6 * X[:, 3]
    return X


def kkt_residual(obj, W, lam):
    g = obj.grad(W)
    off = ~np.eye(obj.d, dtype=bool)
    act = (W != 0) & off
    r_act = np.abs(g[act] + lam * np.sign(W[act])).max() if act.any() else 0.0
    r_in = max(0.0, (np.abs(g[off & ~act]) - lam).max()) if (off & ~act).any() else 0.0
    return max(r_act, r_in)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_without_acyclicity_the_path_is_each_columns_lasso_path(seed):
    X = sem_data(seed=seed)
    Xc = X - X.mean(0)
    path = follow_path(NotearsObjective(X, rho=0.0), lambda_min_ratio=1e-2, max_step=1.0)
    lam_min = path.lambdas[-1]
    d = X.shape[1]
    for j in range(d):
        others = [i for i in range(d) if i != j]
        alphas, _, coefs = lars_path(Xc[:, others], Xc[:, j], method="lasso")
        keep = alphas >= lam_min  # lars_path runs on to alpha = 0
        ours = sorted((e.lam for e in path.events if e.kind in ("enter", "leave") and e.edge[1] == j), reverse=True)
        assert np.allclose(ours, alphas[keep], atol=1e-8, rtol=0)
        for a, c in zip(alphas[keep], coefs.T[keep]):
            assert np.abs(path.W_at(a)[others, j] - c).max() < 1e-8


def test_with_a_threshold_every_thresholded_graph_of_the_path_is_at_a_knot():
    # the lasso path is exactly piecewise linear between its breakpoints, so W_at on a fine
    # grid enumerates the thresholded graphs it passes through; without threshold knots the
    # steps skip some of them
    X = sem_data(seed=3)
    obj = NotearsObjective(X, rho=0.0)
    exact = follow_path(obj, lambda_min_ratio=1e-2, max_step=1.0)
    tau = 0.3
    along = {(np.abs(exact.W_at(lam)) > tau).tobytes()
             for lam in np.geomspace(exact.lambdas[0], exact.lambdas[-1], 4000)}
    knots = lambda p: {(np.abs(W) > tau).tobytes() for W in p.weights}  # noqa: E731
    assert along - knots(exact)  # the test has something to find
    assert along <= knots(follow_path(obj, lambda_min_ratio=1e-2, max_step=1.0, threshold=tau))
    with pytest.raises(ValueError, match="threshold"):
        follow_path(obj, threshold=0.0)


def find_lasso_drop():
    """A small design whose lasso path has a variable leave (found by lars_path)."""
    for seed in range(3000):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(30, 5)) @ rng.normal(size=(5, 5))  # 5 nodes
        alphas, active, coefs = lars_path(X[:, 1:] - X[:, 1:].mean(0), X[:, 0] - X[:, 0].mean(), method="lasso")
        nnz = (np.abs(coefs) > 1e-12).sum(0)  # lars leaves round-off (1e-17) where a variable drops
        drops = [k for k in range(1, len(nnz)) if nnz[k] < nnz[k - 1]]
        if drops and alphas[drops[0]] > 0.01 * alphas[0]:
            return X, alphas[drops[0]]
    raise AssertionError("no design with a drop found")


def test_a_leave_event_is_found_at_its_known_lambda():
    X, lam_drop = find_lasso_drop()
    path = follow_path(NotearsObjective(X, rho=0.0), lambda_min_ratio=1e-3, max_step=1.0)
    leaves = [e.lam for e in path.events if e.kind == "leave" and e.edge[1] == 0]
    assert min(abs(lam - lam_drop) for lam in leaves) < 1e-8


@pytest.mark.parametrize("make", [lambda X: NotearsObjective(X, rho=2.0, alpha=0.5), lambda X: DagmaObjective(X, mu=1.0),
                                  lambda X: DagmaObjective(X, mu=0.01)])  # μ = 0.01: the path folds and jumps
def test_stationarity_at_every_knot_and_events_where_their_conditions_hold(make):
    obj = make(sem_data())
    path = follow_path(obj, lambda_min_ratio=0.05, max_step=0.05)
    assert path.stopped == "end"
    for lam, W in zip(path.lambdas, path.weights):
        assert kkt_residual(obj, W, lam) <= 1e-6
    for e in path.events:
        if e.kind == "enter":  # |∂_ij f| = λ at the entry
            k = int(np.argmin(np.abs(path.lambdas - e.lam)))
            g = obj.grad(path.weights[k])
            assert abs(abs(g[e.edge]) - e.lam) < 1e-6
        if e.kind == "leave":
            k = int(np.argmin(np.abs(path.lambdas - e.lam)))
            assert path.weights[k][e.edge] == 0 and path.weights[k - 1][e.edge] != 0
    for _, A in path.candidate_dags(threshold=0.1):
        assert is_acyclic(A)


def test_a_fold_is_found_where_the_support_hessian_turns_singular_and_the_path_jumps_lower():
    """DAGMA at μ = 0.01 on this design: a 2-cycle's minima end in a fold. The fold must sit
    where H_AA's smallest eigenvalue reaches 0 (relative 1e-5), the jump must land on a strict
    local minimum (KKT, H_AA positive definite) whose objective is below the old branch's
    point at the same λ, and the path must go on to λ_min."""
    obj = DagmaObjective(sem_data(seed=0), mu=0.01)
    path = follow_path(obj, lambda_min_ratio=0.05, max_step=0.05)
    assert path.stopped == "end"
    folds = [e for e in path.events if e.kind == "fold"]
    assert len(folds) >= 1 and folds[0].edge is not None
    lam = folds[0].lam
    k = int(np.flatnonzero(path.lambdas == lam)[0])  # the knot after the jump
    W_old, W_new = path.weights[k - 1], path.weights[k]
    A_old = np.argwhere(W_old != 0)
    H = obj.hessian_on(W_old, A_old)
    eig = np.linalg.eigvalsh(H)
    assert eig[0] <= 1e-5 * eig[-1]
    assert kkt_residual(obj, W_new, lam) <= 1e-6
    A_new = np.argwhere(W_new != 0)
    assert np.linalg.eigvalsh(obj.hessian_on(W_new, A_new))[0] > 0
    F = lambda W: obj.value(W) + lam * np.abs(W).sum()  # noqa: E731
    assert F(W_new) < F(W_old)


def test_local_minimum_of_the_convex_case_is_each_columns_lasso_solution():
    from sklearn.linear_model import Lasso

    X = sem_data(seed=3)
    Xc = X - X.mean(0)
    obj = NotearsObjective(X, rho=0.0)
    lam = 0.05
    W0 = np.random.default_rng(0).normal(size=(5, 5))
    W = local_minimum(obj, W0, lam)
    for j in range(5):
        others = [i for i in range(5) if i != j]
        ref = Lasso(alpha=lam, fit_intercept=False, tol=1e-14, max_iter=100000).fit(Xc[:, others], Xc[:, j])
        assert np.abs(W[others, j] - ref.coef_).max() < 1e-7


def test_orthant_newton_reaches_each_columns_lasso_solution_in_the_convex_case():
    """The Newton descent itself (not local_minimum's L-BFGS-B fallback) against scikit-learn's Lasso."""
    from sklearn.linear_model import Lasso

    X = sem_data(seed=4)
    Xc = X - X.mean(0)
    obj = NotearsObjective(X, rho=0.0)
    for lam in (0.02, 0.1):
        W = _orthant_newton(obj, np.random.default_rng(1).normal(size=(5, 5)), lam, 1e-10)
        assert W is not None
        for j in range(5):
            others = [i for i in range(5) if i != j]
            ref = Lasso(alpha=lam, fit_intercept=False, tol=1e-14, max_iter=100000).fit(Xc[:, others], Xc[:, j])
            assert np.abs(W[others, j] - ref.coef_).max() < 1e-7


def test_orthant_newton_ends_at_strict_local_minima_of_the_nonconvex_problem():
    """DAGMA at μ = 0.01 (nonconvex, with folds): from random starts the descent returns a point
    that satisfies KKT to 1e-8, has a positive definite support Hessian, lies below its start,
    and no small random perturbation lowers F (the defining property of a local minimum)."""
    obj = DagmaObjective(sem_data(seed=0), mu=0.01)
    lam = 0.05 * np.abs(obj.grad(np.zeros((5, 5)))).max()
    F = lambda W: obj.value(W) + lam * np.abs(W).sum()  # noqa: E731
    rng = np.random.default_rng(0)
    found = 0
    for _ in range(10):
        W0 = rng.normal(scale=0.3, size=(5, 5))
        np.fill_diagonal(W0, 0.0)
        W = _orthant_newton(obj, W0, lam, 1e-10)
        if W is None:
            continue
        found += 1
        assert kkt_residual(obj, W, lam) <= 1e-8
        A = np.argwhere(W != 0)
        assert len(A) and np.linalg.eigvalsh(obj.hessian_on(W, A))[0] > 0
        assert F(W) <= F(W0)
        for _ in range(50):
            U = rng.normal(size=(5, 5))
            np.fill_diagonal(U, 0.0)
            assert F(W + 1e-4 * U / np.linalg.norm(U)) >= F(W) - 1e-12
    assert found >= 8


def test_fixed_support_stretch_matches_resolving_from_scratch():
    obj = NotearsObjective(sem_data(), rho=2.0, alpha=0.5)
    path = follow_path(obj, lambda_min_ratio=0.05, max_step=0.005)
    # the longest stretch of knots with one support
    masks = [tuple((W != 0).ravel()) for W in path.weights]
    best, start = (0, 0), 0
    for k in range(1, len(masks) + 1):
        if k == len(masks) or masks[k] != masks[start]:
            best = max(best, (k - start, start))
            start = k
    length, s0 = best
    assert length >= 20
    ks = np.linspace(s0, s0 + length - 1, 20).astype(int)
    support = np.argwhere(path.weights[ks[0]] != 0)
    signs = np.sign(path.weights[ks[0]][support[:, 0], support[:, 1]])
    for k in ks:
        lam = path.lambdas[k]

        def fun(w):
            W = np.zeros((obj.d, obj.d))
            W[support[:, 0], support[:, 1]] = w
            g = obj.grad(W)[support[:, 0], support[:, 1]]
            return obj.value(W) + lam * signs @ w, g + lam * signs

        res = minimize(fun, np.zeros(len(support)), jac=True, method="BFGS", options={"gtol": 1e-11})
        assert np.abs(res.x - path.weights[k][support[:, 0], support[:, 1]]).max() < 1e-6


def test_an_independent_lbfgs_solve_from_a_path_point_stays_there():
    """The ℓ1 problem as a smooth bound-constrained one (W = W⁺ − W⁻, both ≥ 0), solved by
    scipy's L-BFGS-B from the path's own point at λ: it must not move by more than 1e-4."""
    obj = NotearsObjective(sem_data(), rho=2.0, alpha=0.5)
    path = follow_path(obj, lambda_min_ratio=0.05, max_step=0.05)
    d = obj.d
    off = ~np.eye(d, dtype=bool)
    for k in (len(path.lambdas) // 3, len(path.lambdas) - 1):
        lam, W0 = path.lambdas[k], path.weights[k]

        def fun(z):
            P, M = z[: d * d].reshape(d, d), z[d * d:].reshape(d, d)
            W = (P - M) * off
            g = obj.grad(W)
            return obj.value(W) + lam * (P + M)[off].sum(), np.concatenate([(g + lam) * off, (-g + lam) * off]).ravel()

        z0 = np.concatenate([np.maximum(W0, 0), np.maximum(-W0, 0)]).ravel()
        res = minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=[(0, None)] * (2 * d * d),
                       options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 5000})
        W = (res.x[: d * d] - res.x[d * d:]).reshape(d, d) * off
        assert np.abs(W - W0).max() < 1e-4


def test_the_dagma_packages_own_solver_warm_started_at_a_path_point_stays_there():
    """dagma's Adam solver of μ·(Q + λ₁‖W‖₁) + h_s at fixed μ, s (λ₁ = λ/μ; the diagonal
    excluded, as in our objective), started at a DAG-flow knot: 2000 steps at lr 1e-5 (up to
    2e-2 of travel) move it by < 1e-4, while the same run from a point pushed off the path
    by 1e-2 travels back by > 1e-3."""
    dagma = pytest.importorskip("dagma.linear")
    from tqdm import tqdm

    X, mu = sem_data(), 0.1
    obj = DagmaObjective(X, mu=mu)
    path = follow_path(obj, lambda_min_ratio=0.05, max_step=0.05)
    ref = dagma.DagmaLinear("l2", dtype=np.float64)
    ref.X = X - X.mean(0)
    ref.n, ref.d = X.shape
    ref.cov, ref.Id = ref.X.T @ ref.X / ref.n, np.eye(ref.d)
    ref.inc_r = ref.inc_c = None
    ref.exc_r = ref.exc_c = tuple(range(ref.d))  # no self-loops
    ref.checkpoint = 10**9
    for k in (len(path.lambdas) // 2, len(path.lambdas) - 1):
        lam, W0 = path.lambdas[k], path.weights[k]
        ref.lambda1 = lam / mu
        W, ok = ref.minimize(W0.copy(), mu, 2000, 1.0, 1e-5, tol=0.0, pbar=tqdm(disable=True))
        assert ok and np.abs(W - W0).max() < 1e-4
        i, j = np.argwhere(W0 != 0)[0]
        W1 = W0.copy()
        W1[i, j] += 1e-2
        W, ok = ref.minimize(W1.copy(), mu, 2000, 1.0, 1e-5, tol=0.0, pbar=tqdm(disable=True))  # it works in place
        assert np.abs(W - W1).max() > 1e-3


def test_path_object_queries_and_errors():
    obj = NotearsObjective(sem_data(), rho=0.0)
    path = follow_path(obj, lambda_min_ratio=0.01, max_step=1.0)
    stab = path.edge_stability()
    assert stab.shape == (5, 5) and np.all((0 <= stab) & (stab <= 1)) and np.all(np.diag(stab) == 0)
    assert stab[0, 1] > 0.5  # the strongest dependence is present over most of the path
    with pytest.raises(ValueError, match="outside"):
        path.W_at(10 * path.lambdas[0])
    with pytest.raises(ValueError, match="lambda_min_ratio"):
        follow_path(obj, lambda_min_ratio=0.0)
    assert not is_acyclic(np.array([[0, 1], [1, 0]])) and is_acyclic(np.array([[0, 1], [0, 0]]))


def test_estimator_selects_acyclic_graphs_and_refuses_bad_options():
    from neurips26.causal import DagFlow

    X = sem_data(n=300)
    model = DagFlow("dagma", lambda_min_ratio=0.02).fit(X)
    for criterion in ("bic", "stability"):
        A = model.select(criterion)
        assert A.shape == (5, 5) and is_acyclic(A)
    bic = model.select("bic")
    assert bic[0, 1] or bic[1, 0]  # the strongest dependence is found
    assert is_acyclic(model.graph_at(model.path_.lambdas[-1]))
    assert sum(model.n_evaluations_.values()) > 0
    with pytest.raises(ValueError, match="formulation"):
        DagFlow("pc").fit(X)  # scikit-learn's contract: __init__ stores, fit validates
    with pytest.raises(ValueError, match="criterion"):
        model.select("aic")


def test_the_default_path_end_is_glmnets_ratio():
    from neurips26.causal import DagFlow
    from neurips26.causal import default_lambda_min_ratio

    X = sem_data(n=60)
    model = DagFlow("lasso").fit(X)
    hi, lo = model.path_.lambda_range
    assert model.lambda_min_ratio_ == 1e-4 and np.isclose(lo / hi, 1e-4, rtol=1e-9)
    assert DagFlow("lasso", lambda_min_ratio=0.1).fit(X).lambda_min_ratio_ == 0.1
    assert default_lambda_min_ratio(5, 8) == 1e-2  # fewer samples than variables


def test_without_anchors_a_mu_schedule_follows_one_path_per_mu_and_selects_among_all_of_them():
    from neurips26.causal import DagFlow, refit_bic

    X = sem_data(n=300)
    model = DagFlow("dagma", mu=(1.0, 0.01), lambda_min_ratio=0.05, anchors=None).fit(X)
    assert len(model.paths_) == 2 and model.path_ is model.paths_[0]
    # the second path is DAGMA's objective at μ = 0.01: its λ_max is μ times the first one's
    assert np.isclose(model.paths_[1].lambdas[0], 0.01 * model.paths_[0].lambdas[0], rtol=1e-6)
    graphs = model.candidate_graphs()
    assert all(is_acyclic(A) for A in graphs)
    assert len({A.tobytes() for A in graphs}) == len(graphs)
    single = DagFlow("dagma", mu=1.0, lambda_min_ratio=0.05).fit(X).candidate_graphs()
    assert len(graphs) > len(single)
    best = model.select("bic")
    assert refit_bic(model.X_, best) == min(refit_bic(model.X_, A) for A in graphs)
    with pytest.raises(ValueError, match="dagma"):
        DagFlow("notears", mu=(1.0, 0.1)).fit(X)
    with pytest.raises(ValueError, match="positive"):
        DagFlow("dagma", mu=(1.0, 0.0)).fit(X)


def test_make_acyclic_removes_only_the_weakest_edge_of_a_cycle():
    from neurips26.causal import make_acyclic

    W = np.zeros((4, 4))
    W[0, 1], W[1, 2], W[2, 0] = 1.0, 0.9, 0.5  # cycle 0 → 1 → 2 → 0, weakest 2 → 0
    W[3, 0] = 0.4  # weaker than every cycle edge, but on no cycle: must stay
    A = make_acyclic(W, 0.3)
    assert is_acyclic(A) and A[2, 0] == 0 and A[3, 0] == 1 and A[0, 1] == 1 and A[1, 2] == 1


def test_make_acyclic_equals_a_depth_first_reference_on_random_graphs():
    """make_acyclic's transitive closure (BLAS matmuls of 0/1 matrices) against the rule written
    with a depth-first search: while some edge i → j has a path j ⇝ i, drop the weakest such edge."""
    from neurips26.causal import make_acyclic

    def reaches(A, a, b):
        stack, seen = [a], {a}
        while stack:
            for c in np.flatnonzero(A[stack.pop()]):
                if c == b:
                    return True
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        return False

    def reference(W, tau):
        A = (np.abs(W) > tau).astype(int)
        np.fill_diagonal(A, 0)
        while True:
            on_cycle = [(abs(W[i, j]), i, j) for i, j in np.argwhere(A) if reaches(A, j, i)]
            if not on_cycle:
                return A
            _, i, j = min(on_cycle)
            A[i, j] = 0

    rng = np.random.default_rng(3)
    for trial in range(150):
        d = int(rng.integers(2, 13))
        W = rng.normal(size=(d, d)) * (rng.random((d, d)) < rng.uniform(0.1, 0.7))
        A = make_acyclic(W, 0.3)
        assert np.array_equal(A, reference(W, 0.3)), trial
        assert is_acyclic(A)


def test_first_crossing_finds_the_earliest_root_not_the_linearly_predicted_one():
    """Analytic margins: linear interpolation over [0, 1] predicts m1 first (at 0.5), but cos(3δ)
    reaches 0 first, at π/6; the locator must return that margin there, to the tolerance, in far
    fewer corrector solves than bisection's 33 to a 1e-10 bracket."""
    from neurips26.causal.path import _first_crossing

    calls = []

    def evaluate(dl):
        calls.append(dl)
        return (dl, None, np.array([0.5 - dl ** 2, 0.3 - 0.5 * dl]), np.array([np.cos(3 * dl)]), None)

    lo, hi = evaluate(0.0), evaluate(1.0)
    calls.clear()
    k, pt = _first_crossing(evaluate, lo, hi, 1e-12, 1e-10)
    assert k == 2 and abs(pt[0] - np.pi / 6) < 1e-10
    assert len(calls) < 20
    # the corrector failing inside the bracket is reported, not guessed past
    assert _first_crossing(lambda dl: None, lo, hi, 1e-12, 1e-10) is None


def test_orthant_newton_descends_from_a_dense_indefinite_fold_start():
    """A recorded fold-jump start (tests/causal/data/dense_fold_start.json) on 295 nonzero entries,
    from which the descent meets indefinite H_SS (curvature -1e-4 against 70) for hundreds of steps: it must end at a strict local minimum below the start (the
    previous shift ladder returned None there, and L-BFGS-B then spent 5 000 iterations in vain)."""
    import json
    from pathlib import Path

    from neurips26.reproduce.dag_flow import simulate_dag, simulate_sem

    case = json.loads((Path(__file__).parent / "data" / "dense_fold_start.json").read_text())
    rng = np.random.default_rng(case["seed"])
    X, _ = simulate_sem(simulate_dag(case["graph"], case["d"], rng), case["n"], rng)
    obj = DagmaObjective(X, mu=case["mu"])
    W0, lam = np.array(case["W0"]), case["lam"]
    with threadpool_limits(limits=1, user_api="blas"):  # as follow_path runs it (300 x 300 systems)
        W = _orthant_newton(obj, W0, lam, 1e-10)
    assert W is not None
    assert kkt_residual(obj, W, lam) <= 1e-8
    assert np.linalg.eigvalsh(obj.hessian_on(W, np.argwhere(W != 0)))[0] > 0
    assert obj.value(W) + lam * np.abs(W).sum() < obj.value(W0) + lam * np.abs(W0).sum()
