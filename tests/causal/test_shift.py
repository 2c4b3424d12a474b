"""The shift of the orthant Newton descent past a fold, τ = 2|λ_min(H_SS)|: λ_min from Lanczos
on (H + τ₀I)⁻¹ equals LAPACK's full eigenvalue solve, and a descent that takes it that way
ends where the one that calls LAPACK every time ends."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import neurips26.causal.path as path_module
from neurips26.causal import DagmaObjective, local_minimum
from neurips26.causal.path import (_newton_factor, _orthant_newton, _smallest_eigenvalue_shift_invert,
                                   _solve_factored)
from neurips26.reproduce.dag_flow import simulate_dag, simulate_sem


def spread_indefinite(k, low, seed=0):
    """A symmetric k × k matrix with eigenvalues from `low` < 0 (simple) up to about 400: the
    shape of a dense support Hessian past a fold, where |λ_min| is 1e-4 of the spread."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(k, k)))
    eigenvalues = np.concatenate([[low], np.geomspace(1e-3, 400.0, k - 1)])
    return (Q * eigenvalues) @ Q.T


@pytest.mark.parametrize("factor", [1.2, 3.0, 10.0])
def test_shift_invert_lanczos_finds_the_smallest_eigenvalue(factor):
    S = spread_indefinite(300, -0.02)
    S = 0.5 * (S + S.T)
    exact = np.linalg.eigvalsh(S)[0]
    low = _smallest_eigenvalue_shift_invert(S, factor * abs(exact))
    assert low == pytest.approx(exact, rel=1e-9)


def test_shift_invert_declines_a_shift_that_does_not_make_the_matrix_definite():
    S = spread_indefinite(300, -0.02)
    S = 0.5 * (S + S.T)
    assert _smallest_eigenvalue_shift_invert(S, 0.5 * 0.02) is None


def solves(L, A):
    """L is a Cholesky factor of A: its solves invert A on three right-hand sides, to a
    backward error near round-off (LAPACK leaves L's upper triangle unset)."""
    rng = np.random.default_rng(5)
    for _ in range(3):
        b = rng.normal(size=len(A))
        x = _solve_factored(L, b)
        assert np.linalg.norm(A @ x - b) <= 1e-11 * (np.abs(A).max() * np.linalg.norm(x) + np.linalg.norm(b))


@pytest.mark.parametrize("after_indefinite", [False, True])
@pytest.mark.parametrize("guess", [None, 0.01, 0.021, 0.03, 0.5])
def test_newton_factor_shift_is_twice_the_most_negative_eigenvalue(guess, after_indefinite):
    """With no guess, a guess too small to factor (0.01 < 0.02: LAPACK's solve instead), one
    just above |λ_min| and usable guesses:
    τ = 2|λ_min| + 1e-10·max|H| and the step solves with H + τI − εI."""
    H = spread_indefinite(250, -0.02, seed=1)
    S = 0.5 * (H + H.T)
    L, tau, shifted = _newton_factor(H, guess, after_indefinite)
    assert shifted
    expected = 2 * abs(np.linalg.eigvalsh(S)[0]) + 1e-10 * np.abs(S).max()
    assert tau == pytest.approx(expected, rel=1e-9)
    T = S + tau * np.eye(len(S))
    solves(L, T - 1e-12 * max(1.0, T.max(), -T.min()) * np.eye(len(S)))


@pytest.mark.parametrize("after_indefinite", [False, True])
def test_newton_factor_leaves_a_definite_hessian_unshifted(after_indefinite):
    """Right after a shifted step the eigenvalue comes first; a positive definite H still gets
    its own factor, and the guess is handed back unchanged."""
    H = spread_indefinite(250, 0.004, seed=2)
    L, tau, shifted = _newton_factor(H, 0.05, after_indefinite)
    assert not shifted and tau == 0.05
    S = 0.5 * (H + H.T)
    solves(L, S - 1e-12 * max(1.0, S.max(), -S.min()) * np.eye(len(S)))


def test_descents_through_shift_invert_end_where_eigh_descents_end(monkeypatch):
    """DAGMA's continuation μ = 1 → 0.1 → 0.01 at a small λ on an ER2 SEM with d = 20: the
    free sets reach hundreds of entries past folds, where the shift comes from shift-invert
    Lanczos; with it disabled (LAPACK's eigenvalue solve at every indefinite step) each descent
    ends at the same minimum to 1e-8."""
    rng = np.random.default_rng(0)
    B = simulate_dag("ER2", 20, rng)
    X, _ = simulate_sem(B, 500, rng)
    objectives = [DagmaObjective(X, mu=mu) for mu in (1.0, 0.1, 0.01)]
    calls = []
    original = path_module._smallest_eigenvalue_shift_invert
    monkeypatch.setattr(path_module, "_smallest_eigenvalue_shift_invert",
                        lambda S, tau0: calls.append(len(S)) or original(S, tau0))

    def continuation():
        W, out = np.zeros((20, 20)), []
        for obj in objectives:
            W = local_minimum(obj, W, obj.mu * 0.02)
            assert W is not None
            out.append(W)
        return out

    with threadpool_limits(limits=1, user_api="blas"):
        fast = continuation()
        assert calls, "no descent took the shift-invert route: the test does not test it"
        monkeypatch.setattr(path_module, "SHIFT_INVERT_MIN", 10**9)
        calls.clear()
        slow = continuation()
        assert not calls
    for a, b in zip(fast, slow):
        assert np.array_equal(a != 0, b != 0)
        assert np.abs(a - b).max() <= 1e-8


def test_orthant_newton_shift_guess_survives_a_free_set_that_grows(monkeypatch):
    """A guess from a smaller free set is only a guess: a descent from far away (the free set
    changing at every step; here one guess is declined, as H + τ₀I does not factor, and LAPACK
    decides instead) still ends at a strict local minimum."""
    answers = []
    original = path_module._smallest_eigenvalue_shift_invert
    monkeypatch.setattr(path_module, "_smallest_eigenvalue_shift_invert",
                        lambda S, tau0: answers.append(original(S, tau0)) or answers[-1])
    rng = np.random.default_rng(3)
    B = simulate_dag("SF2", 20, rng)
    X, _ = simulate_sem(B, 500, rng)
    obj = DagmaObjective(X, mu=0.01)
    lam = 0.01 * np.abs(obj.grad(np.zeros((20, 20)))).max()
    W0 = 0.1 * rng.normal(size=(20, 20))
    np.fill_diagonal(W0, 0.0)
    with threadpool_limits(limits=1, user_api="blas"):
        W = _orthant_newton(obj, W0, lam, 1e-10)
    assert None in answers and any(a is not None for a in answers)
    assert W is not None
    A = np.argwhere(W != 0)
    assert np.linalg.eigvalsh(obj.hessian_on(W, A))[0] > 0
