"""Bad input to the public entry points of ``neurips26.causal`` (issue 22, section 5).

Each probe feeds one entry point one class of bad input (NaN, inf, empty, wrong shape or dtype,
badly scaled data, an out-of-range setting) and asserts the exception type and that the message
names the argument. ``PROBES`` is a plain table so that the counts (clear / unclear / silent) can
be taken from it.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.causal import (
    DagFlow, DagmaObjective, GolemObjective, NotearsObjective, check_data, follow_path, is_acyclic, local_minimum,
    make_acyclic, refit_bic, select_by_bic,
)

NAN, INF = float("nan"), float("inf")


def _X(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] += 0.8 * X[:, 0]
    X[:, 2] += 0.5 * X[:, 1]
    return X


def _with(array, index, value):
    array = np.array(array, dtype=float)
    array[index] = value
    return array


def _scaled(factor, column=None):
    X = _X()
    if column is None:
        return X * factor
    X[:, column] *= factor
    return X


@functools.lru_cache(maxsize=None)
def _fitted():
    return DagFlow("lasso", lambda_min_ratio=0.1).fit(_X())


def _obj():
    return NotearsObjective(_X())


def _fit(X=None, **params):
    return DagFlow(**{"lambda_min_ratio": 0.1, **params}).fit(_X() if X is None else X)


# (id, call, exception, pattern the message must match: it names the argument)
PROBES = [
    # ------------------------------------------------------------ data (check_data, every objective)
    ("data-nan", lambda: check_data(_with(_X(), (3, 2), NAN)), ValueError, r"X.*NaN"),
    ("data-inf", lambda: NotearsObjective(_with(_X(), (0, 0), INF)), ValueError, r"X.*inf"),
    ("data-1d", lambda: check_data(np.ones(5)), ValueError, r"X.*shape"),
    ("data-one-sample", lambda: check_data(_X()[:1]), ValueError, r"X.*n >= 2"),
    ("data-one-column", lambda: check_data(_X()[:, :1]), ValueError, r"X.*d >= 2"),
    ("data-empty", lambda: check_data(np.zeros((0, 3))), ValueError, r"X.*shape"),
    ("data-constant", lambda: check_data(np.column_stack([_X(), np.full(60, 0.1)])), ValueError,
     r"X has constant columns \[3\]"),
    ("data-tiny", lambda: check_data(_scaled(1e-200)), ValueError, r"X is badly scaled"),
    ("data-huge", lambda: check_data(_scaled(1e200)), ValueError, r"X is badly scaled"),
    ("data-one-huge-column", lambda: DagmaObjective(_scaled(1e200, column=0)), ValueError,
     r"X is badly scaled.*column.*\[0\]"),
    ("data-one-tiny-column", lambda: GolemObjective(_scaled(1e-200, column=1)), ValueError,
     r"X is badly scaled.*column.*\[1\]"),
    ("data-complex", lambda: check_data(_X() + 1j), TypeError, r"X.*real"),
    ("data-strings", lambda: check_data([["a", "b"], ["c", "d"]]), TypeError, r"X.*real"),
    # ------------------------------------------------------------ objectives' settings
    ("dagma-mu-nan", lambda: DagmaObjective(_X(), mu=NAN), ValueError, r"\bmu\b"),
    ("dagma-mu-inf", lambda: DagmaObjective(_X(), mu=INF), ValueError, r"\bmu\b"),
    ("dagma-mu-zero", lambda: DagmaObjective(_X(), mu=0.0), ValueError, r"\bmu\b.*> 0"),
    ("dagma-mu-negative", lambda: DagmaObjective(_X(), mu=-1.0), ValueError, r"\bmu\b"),
    ("dagma-mu-string", lambda: DagmaObjective(_X(), mu="1"), TypeError, r"\bmu\b"),
    ("dagma-s-nan", lambda: DagmaObjective(_X(), s=NAN), ValueError, r"\bs\b"),
    ("dagma-s-zero", lambda: DagmaObjective(_X(), s=0.0), ValueError, r"\bs\b"),
    ("notears-rho-nan", lambda: NotearsObjective(_X(), rho=NAN), ValueError, r"\brho\b"),
    ("notears-rho-inf", lambda: NotearsObjective(_X(), rho=INF), ValueError, r"\brho\b"),
    ("notears-rho-negative", lambda: NotearsObjective(_X(), rho=-1.0), ValueError, r"\brho\b"),
    ("notears-alpha-nan", lambda: NotearsObjective(_X(), alpha=NAN), ValueError, r"\balpha\b"),
    ("golem-lambda2-nan", lambda: GolemObjective(_X(), lambda2=NAN), ValueError, r"lambda2"),
    ("golem-lambda2-negative", lambda: GolemObjective(_X(), lambda2=-1.0), ValueError, r"lambda2"),
    ("objective-W-shape", lambda: _obj().value(np.zeros((2, 2))), ValueError, r"\bW\b"),
    # ------------------------------------------------------------ follow_path
    ("path-max-step-zero", lambda: follow_path(_obj(), 0.1, max_step=0.0), ValueError, r"max_step"),
    ("path-max-step-negative", lambda: follow_path(_obj(), 0.1, max_step=-0.05), ValueError, r"max_step"),
    ("path-max-step-nan", lambda: follow_path(_obj(), 0.1, max_step=NAN), ValueError, r"max_step"),
    ("path-max-step-inf", lambda: follow_path(_obj(), 0.1, max_step=INF), ValueError, r"max_step"),
    ("path-lambda-min-ratio-nan", lambda: follow_path(_obj(), NAN), ValueError, r"lambda_min_ratio"),
    ("path-lambda-min-ratio-one", lambda: follow_path(_obj(), 1.0), ValueError, r"lambda_min_ratio"),
    ("path-tol-zero", lambda: follow_path(_obj(), 0.1, tol=0.0), ValueError, r"\btol\b"),
    ("path-tol-nan", lambda: follow_path(_obj(), 0.1, tol=NAN), ValueError, r"\btol\b"),
    ("path-max-knots-zero", lambda: follow_path(_obj(), 0.1, max_knots=0), ValueError, r"max_knots"),
    ("path-max-knots-float", lambda: follow_path(_obj(), 0.1, max_knots=10.5), TypeError, r"max_knots"),
    ("path-threshold-nan", lambda: follow_path(_obj(), 0.1, threshold=NAN), ValueError, r"threshold"),
    ("path-threshold-inf", lambda: follow_path(_obj(), 0.1, threshold=INF), ValueError, r"threshold"),
    ("path-objective-array", lambda: follow_path(_X(), 0.1), TypeError, r"objective"),
    # ------------------------------------------------------------ local_minimum
    ("local-min-W0-shape", lambda: local_minimum(_obj(), np.zeros((2, 2)), 0.1), ValueError, r"W0"),
    ("local-min-W0-nan", lambda: local_minimum(_obj(), _with(np.zeros((3, 3)), (0, 1), NAN), 0.1), ValueError,
     r"W0.*NaN"),
    ("local-min-lam-negative", lambda: local_minimum(_obj(), np.zeros((3, 3)), -0.1), ValueError, r"\blam\b"),
    ("local-min-lam-nan", lambda: local_minimum(_obj(), np.zeros((3, 3)), NAN), ValueError, r"\blam\b"),
    ("local-min-tol-zero", lambda: local_minimum(_obj(), np.zeros((3, 3)), 0.1, tol=0.0), ValueError, r"\btol\b"),
    # ------------------------------------------------------------ DagFlow.fit: settings
    ("fit-mu-inf", lambda: _fit(mu=INF), ValueError, r"\bmu\b"),
    ("fit-mu-schedule-inf", lambda: _fit(mu=(1.0, INF)), ValueError, r"\bmu\b"),
    ("fit-mu-nan", lambda: _fit(mu=NAN), ValueError, r"\bmu\b"),
    ("fit-mu-zero", lambda: _fit(mu=0.0), ValueError, r"\bmu\b"),
    ("fit-mu-empty", lambda: _fit(mu=()), ValueError, r"\bmu\b"),
    ("fit-mu-string", lambda: _fit(mu="big"), ValueError, r"\bmu\b"),
    ("fit-max-step-inf", lambda: _fit(max_step=INF), ValueError, r"max_step"),
    ("fit-max-step-nan", lambda: _fit(max_step=NAN), ValueError, r"max_step"),
    ("fit-max-step-zero", lambda: _fit(max_step=0.0), ValueError, r"max_step"),
    ("fit-threshold-inf", lambda: _fit(threshold=INF), ValueError, r"threshold"),
    ("fit-threshold-nan", lambda: _fit(threshold=NAN), ValueError, r"threshold"),
    ("fit-lambda-min-ratio-nan", lambda: _fit(lambda_min_ratio=NAN), ValueError, r"lambda_min_ratio"),
    ("fit-min-stability-nan", lambda: _fit(min_stability=NAN), ValueError, r"min_stability"),
    ("fit-s-nan", lambda: _fit(s=NAN), ValueError, r"\bs\b"),
    ("fit-s-zero", lambda: _fit(s=0.0), ValueError, r"\bs\b"),
    ("fit-rho-nan", lambda: _fit(formulation="notears", rho=NAN), ValueError, r"\brho\b"),
    ("fit-alpha-inf", lambda: _fit(formulation="notears", alpha=INF), ValueError, r"\balpha\b"),
    ("fit-lambda2-inf", lambda: _fit(formulation="golem", lambda2=INF), ValueError, r"lambda2"),
    # ------------------------------------------------------------ DagFlow.fit: data
    ("fit-X-nan", lambda: _fit(_with(_X(), (1, 1), NAN)), ValueError, r"X.*NaN"),
    ("fit-X-inf", lambda: _fit(_with(_X(), (1, 1), INF)), ValueError, r"X.*inf"),
    ("fit-X-one-sample", lambda: _fit(_X()[:1]), ValueError, r"X.*1 sample"),
    ("fit-X-one-column", lambda: _fit(_X()[:, :1]), ValueError, r"X.*1 feature"),
    ("fit-X-empty", lambda: _fit(np.zeros((0, 3))), ValueError, r"X.*0 sample"),
    ("fit-X-1d", lambda: _fit(np.ones(10)), ValueError, r"X.*2D"),
    ("fit-X-complex", lambda: _fit(_X() + 1j), ValueError, r"X.*[Cc]omplex"),
    ("fit-X-tiny", lambda: _fit(_scaled(1e-200)), ValueError, r"X is badly scaled"),
    ("fit-X-huge", lambda: _fit(_scaled(1e200)), ValueError, r"X is badly scaled"),
    ("fit-X-constant", lambda: _fit(np.column_stack([_X(), np.ones(60)])), ValueError, r"X has constant columns"),
    # ------------------------------------------------------------ after fit: select, graph_at
    ("select-min-stability-above-one", lambda: _fitted().select("stability", min_stability=2.0), ValueError,
     r"min_stability"),
    ("select-min-stability-nan", lambda: _fitted().select("stability", min_stability=NAN), ValueError,
     r"min_stability"),
    ("select-criterion", lambda: _fitted().select("aic"), ValueError, r"criterion"),
    ("graph-at-lam-nan", lambda: _fitted().graph_at(NAN), ValueError, r"lambda"),
    ("graph-at-path-index", lambda: _fitted().graph_at(_fitted().path_.lambdas[-1], path=3), ValueError, r"\bpath\b"),
    # ------------------------------------------------------------ selection and graphs
    ("bic-no-graphs", lambda: select_by_bic(_X(), []), ValueError, r"graphs.*empty"),
    ("bic-X-nan", lambda: refit_bic(_with(_X(), (0, 0), NAN), np.zeros((3, 3))), ValueError, r"X.*NaN"),
    ("bic-A-shape", lambda: refit_bic(_X(), np.zeros((2, 2))), ValueError, r"\bA\b"),
    ("bic-X-1d", lambda: refit_bic(np.ones(5), np.zeros((1, 1))), ValueError, r"\bX\b"),
    ("bic-graph-shape", lambda: select_by_bic(_X(), [np.zeros((3, 3)), np.zeros((4, 4))]), ValueError,
     r"graphs\[1\]"),
    ("acyclic-W-nan", lambda: make_acyclic(_with(np.zeros((3, 3)), (0, 1), NAN), 0.3), ValueError, r"\bW\b.*NaN"),
    ("acyclic-threshold-nan", lambda: make_acyclic(np.ones((3, 3)), NAN), ValueError, r"threshold"),
    ("acyclic-threshold-negative", lambda: make_acyclic(np.ones((3, 3)), -1.0), ValueError, r"threshold"),
    ("acyclic-W-not-square", lambda: make_acyclic(np.ones((2, 3)), 0.3), ValueError, r"\bW\b.*square"),
    ("is-acyclic-not-square", lambda: is_acyclic(np.ones((2, 3))), ValueError, r"\bA\b.*square"),
]


@pytest.mark.parametrize("call, exc, match", [pytest.param(c, e, m, id=i) for i, c, e, m in PROBES])
def test_bad_input_is_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_probe_ids_are_unique():
    ids = [p[0] for p in PROBES]
    assert len(ids) == len(set(ids))


def test_a_path_that_hits_max_knots_says_so():
    """A path cut by ``max_knots`` before λ_min is labelled so, not "end"."""
    path = follow_path(_obj(), 1e-3, max_step=0.01, max_knots=3)
    assert len(path.lambdas) == 3 and path.stopped == "max_knots"
    assert path.events[-1].kind != "end"


# ------------------------------------------------------------ properties over spaces of inputs
@settings(max_examples=60, deadline=None)
@given(exponent=st.integers(-320, 320))
def test_scaled_data_is_accepted_or_reported_as_badly_scaled_never_as_constant(exponent):
    """X·10^k: accepted where its variances are safely representable (then the objective's
    gradient at 0 is finite and nonzero), otherwise a scale error; never 'constant columns'."""
    with np.errstate(over="ignore", under="ignore"):
        X = _X() * np.float64(10.0) ** exponent
    if not np.isfinite(X).all() or (X == 0).all():
        with pytest.raises(ValueError, match=r"X (has NaN or inf|is badly scaled|has constant columns)"):
            check_data(X)
        return
    try:
        obj = NotearsObjective(X)
    except ValueError as e:
        assert "badly scaled" in str(e) and abs(exponent) > 90
        return
    assert abs(exponent) <= 100
    g = obj.grad(np.zeros((3, 3)))
    assert np.isfinite(g).all() and np.abs(g).max() > 0


@settings(max_examples=60, deadline=None)
@given(mu=st.floats(allow_nan=True, allow_infinity=True), s=st.floats(allow_nan=True, allow_infinity=True))
def test_dagma_accepts_exactly_finite_positive_mu_and_s(mu, s):
    if np.isfinite(mu) and mu > 0 and np.isfinite(s) and s > 0:
        assert DagmaObjective(_X(), mu=mu, s=s).mu == mu
    else:
        with pytest.raises(ValueError, match=r"\b(mu|s)\b"):
            DagmaObjective(_X(), mu=mu, s=s)


@settings(max_examples=40, deadline=None)
@given(max_step=st.one_of(st.floats(max_value=0.0), st.just(NAN), st.just(INF)))
def test_follow_path_refuses_every_max_step_that_is_not_positive_and_finite(max_step):
    with pytest.raises(ValueError, match="max_step"):
        follow_path(_obj(), 0.1, max_step=max_step)
