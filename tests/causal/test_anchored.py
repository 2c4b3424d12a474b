"""A path restarted from a stationary point (``follow_path(start=...)``) and the anchored central
path (``anchored_path``): a restart at one of a path's own knots continues that path; every knot
of the anchored path is a strict local minimum of the last μ's objective; each anchor is the
point the ``dagma`` package's own μ-continuation reaches at that λ₁."""

import contextlib
import io

import numpy as np
import pytest

from neurips26.causal import (CENTRAL_PATH, DAGMA_S, DagFlow, DagmaObjective, NotearsObjective, anchored_path,
                              follow_path)
from neurips26.causal.path import _factor_definite

from .test_dagflow import kkt_residual, sem_data


def _restart_knot(path, lo=0.3, hi=0.7):
    """A knot in the middle of the path, away from every event (a knot at an event sits on a
    kink of the path: restarted there the next step sees the event again)."""
    ev = np.array([e.lam for e in path.events])
    for k in range(int(lo * len(path.lambdas)), int(hi * len(path.lambdas))):
        if np.abs(ev - path.lambdas[k]).min() > 1e-6 * path.lambdas[0]:
            return k
    raise AssertionError("no knot away from the events")


@pytest.mark.parametrize("make", [lambda X: NotearsObjective(X, rho=0.0), lambda X: DagmaObjective(X, mu=1.0),
                                  lambda X: DagmaObjective(X, mu=0.1)])
def test_a_path_restarted_at_one_of_its_knots_continues_it(make):
    obj = make(sem_data())
    path = follow_path(obj, lambda_min_ratio=0.02, max_step=0.05)
    k = _restart_knot(path)
    lam0, lam_max = path.lambdas[k], path.lambdas[0]
    rest = follow_path(obj, lambda_min_ratio=0.02, max_step=0.05, start=(path.weights[k], lam0))
    assert rest.events[0].kind == "anchor" and rest.lambdas[0] == lam0 and rest.stopped == "end"
    ours = [e for e in rest.events[1:]]
    theirs = [e for e in path.events if e.lam < lam0 - 1e-12 * lam_max]
    assert [(e.kind, e.edge) for e in ours] == [(e.kind, e.edge) for e in theirs]
    assert max(abs(a.lam - b.lam) for a, b in zip(ours, theirs)) < 1e-8 * lam_max
    for lam in np.geomspace(lam0, rest.lambdas[-1], 7)[1:]:
        assert np.abs(rest.W_at(lam) - path.W_at(lam)).max() < 1e-6


def test_a_start_is_checked_before_the_path_leaves_it():
    obj = DagmaObjective(sem_data(), mu=1.0)
    path = follow_path(obj, lambda_min_ratio=0.02)
    k = _restart_knot(path)
    W, lam = path.weights[k], path.lambdas[k]
    off = W.copy()
    i, j = np.argwhere(W != 0)[0]
    off[i, j] += 1e-3
    with pytest.raises(ValueError, match="not a stationary point"):
        follow_path(obj, lambda_min_ratio=0.02, start=(off, lam))
    with pytest.raises(ValueError, match="not a stationary point"):
        follow_path(obj, lambda_min_ratio=0.02, start=(W, 1.1 * lam))  # the right point at the wrong λ
    with pytest.raises(ValueError, match="outside the path's range"):
        follow_path(obj, lambda_min_ratio=0.02, start=(W, 2 * path.lambdas[0]))
    with pytest.raises(ValueError, match="outside the path's range"):
        follow_path(obj, lambda_min_ratio=0.5, start=(W, 0.1 * path.lambdas[0]))
    with pytest.raises(ValueError, match=r"W0.*\(5, 5\)"):
        follow_path(obj, start=(W[:4, :4], lam))
    with pytest.raises(TypeError, match="start"):
        follow_path(obj, start=W)


def _anchored(X, anchors=3, ratio=0.01, threshold=None):
    return anchored_path([DagmaObjective(X, mu=m) for m in CENTRAL_PATH], anchors=anchors, lambda_min_ratio=ratio,
                         threshold=threshold)


def test_every_knot_of_the_anchored_path_is_a_strict_local_minimum_of_the_last_mu():
    X = sem_data(n=300)
    obj = DagmaObjective(X, mu=CENTRAL_PATH[-1])
    path = _anchored(X)
    assert path.stopped == "end" and sum(e.kind == "anchor" for e in path.events) == 3
    assert np.all(np.diff(path.lambdas) <= 0)  # non-increasing: equal at an anchor
    lam_max = float(np.abs(obj.grad(np.zeros((5, 5)))).max())
    np.testing.assert_allclose(path.lambda_range, (lam_max, 0.01 * lam_max), rtol=1e-12)
    events = np.array([e.lam for e in path.events])
    for lam, W in zip(path.lambdas, path.weights):
        assert kkt_residual(obj, W, lam) <= 1e-6
        A = np.argwhere(W != 0)
        if len(A) and np.abs(events - lam).min() > 1e-6 * lam_max:  # away from a fold H_AA is definite
            assert _factor_definite(obj.hessian_on(W, A)) is not None


def test_each_anchor_is_where_the_dagma_packages_own_fit_ends():
    """``DagmaLinear("l2").fit(X, lambda1=λ₁)`` runs DAGMA's central path (μ = 1 … 1e-4) by Adam
    from W = 0 at that λ₁: it must end at the anchor's start point (Adam's accuracy: 3e-4 here)."""
    dagma = pytest.importorskip("dagma.linear")
    X = sem_data(n=150)
    path = _anchored(X)
    anchors = [e.lam for e in path.events if e.kind == "anchor"]
    assert len(anchors) == 3
    for lam in anchors:
        k = int(np.flatnonzero(path.lambdas == lam)[-1])  # the restart's knot (the stretch before ends there too)
        with contextlib.redirect_stderr(io.StringIO()):  # dagma's progress bars
            W = dagma.DagmaLinear("l2").fit(X.copy(), lambda1=lam / CENTRAL_PATH[-1], w_threshold=0.0,
                                            s=list(DAGMA_S))  # its default, fresh: dagma mutates it
        assert np.abs(path.weights[k] - W).max() < 2e-3
        assert np.array_equal(np.abs(path.weights[k]) > 0.3, np.abs(W) > 0.3)


def test_anchored_path_follows_dagmas_own_s_schedule():
    """The ``dagma`` package's ``fit`` lowers s along its μ schedule by default (1, 0.9, …, 0.6):
    with objectives that do the same, every knot is a KKT point of the last one (s = 0.6), and
    each anchor is where that default fit ends (Adam's accuracy: 1-2e-4 here)."""
    dagma = pytest.importorskip("dagma.linear")
    X = sem_data(n=150)
    objs = [DagmaObjective(X, mu=mu, s=s) for mu, s in zip(CENTRAL_PATH, DAGMA_S)]
    path = anchored_path(objs, anchors=3, lambda_min_ratio=0.01)
    for lam, W in zip(path.lambdas, path.weights):
        assert kkt_residual(objs[-1], W, lam) <= 1e-6
    anchors = [e.lam for e in path.events if e.kind == "anchor"]
    assert len(anchors) == 3
    for lam in anchors[-2:]:
        k = int(np.flatnonzero(path.lambdas == lam)[-1])
        with contextlib.redirect_stderr(io.StringIO()):
            W = dagma.DagmaLinear("l2").fit(X.copy(), lambda1=lam / CENTRAL_PATH[-1], w_threshold=0.0,
                                            s=list(DAGMA_S))  # a fresh list: dagma mutates it
        assert np.abs(path.weights[k] - W).max() < 2e-3
        assert np.array_equal(np.abs(path.weights[k]) > 0.3, np.abs(W) > 0.3)


def test_dagflow_takes_one_s_per_mu():
    """``DagFlow(s=...)``: a number is every objective's s, a sequence gives one per μ (DAGMA's
    own schedule ``DAGMA_S`` among them); the path is the anchored path of those objectives."""
    X = sem_data(n=150)
    for s in (DAGMA_S, 0.8):
        model = DagFlow(s=s, anchors=3, lambda_min_ratio=0.01).fit(X)
        per_mu = DAGMA_S if s is DAGMA_S else (s,) * len(CENTRAL_PATH)
        ref = anchored_path([DagmaObjective(X, mu=m, s=v) for m, v in zip(CENTRAL_PATH, per_mu)], anchors=3,
                            lambda_min_ratio=0.01, threshold=model.threshold)
        np.testing.assert_array_equal(model.path_.lambdas, ref.lambdas)
        np.testing.assert_array_equal(model.path_.weights, ref.weights)
        assert model.objective_.s == per_mu[-1]
    assert DagFlow().get_params()["s"] == 1.0
    bad_values = [((1.0, 0.9), ValueError, "one value per mu"),
                  ((1.0, 0.9, 0.8, 0.7, 0.0), ValueError, r"s\[4\]"),
                  ((1.0, 0.9, 0.8, 0.7, np.nan), ValueError, r"s\[4\]"),
                  ("1", TypeError, "s must"),
                  (np.ones((5, 1)), ValueError, "one value per mu"),
                  (-1.0, ValueError, "s must")]
    for bad, err, match in bad_values:
        with pytest.raises(err, match=match):
            DagFlow(s=bad, anchors=3).fit(X)


def test_anchored_path_refuses_what_it_cannot_follow():
    X = sem_data()
    objs = [DagmaObjective(X, mu=m) for m in (1.0, 0.1)]
    with pytest.raises(TypeError, match="DagmaObjective"):
        anchored_path([NotearsObjective(X), DagmaObjective(X, mu=0.1)])
    with pytest.raises(TypeError, match="at least two"):
        anchored_path(objs[:1])
    with pytest.raises(ValueError, match="decrease"):
        anchored_path(objs[::-1])
    with pytest.raises(ValueError, match="share their data X"):
        anchored_path([objs[0], DagmaObjective(sem_data(seed=1), mu=0.1)])
    with pytest.raises(ValueError, match="anchors"):
        anchored_path(objs, anchors=0)
    with pytest.raises(ValueError, match="lambda_min_ratio"):
        anchored_path(objs, lambda_min_ratio=1.0)


def test_dagflow_follows_the_anchored_path_by_default_and_one_path_per_mu_on_request():
    X = sem_data(n=300)
    model = DagFlow(lambda_min_ratio=0.01, anchors=3).fit(X)
    ref = _anchored(X, threshold=model.threshold)
    assert len(model.paths_) == 1 and model.path_ is model.paths_[0]
    np.testing.assert_array_equal(model.path_.lambdas, ref.lambdas)
    lam_max = model.path_.lambdas[0] / CENTRAL_PATH[-1]  # in DAGMA's own λ₁ units
    np.testing.assert_allclose(model.lambda1_range_, (lam_max, 0.01 * lam_max), rtol=1e-12)
    assert DagFlow().get_params()["anchors"] == 12
    per_mu = DagFlow(lambda_min_ratio=0.01, anchors=None).fit(X)
    assert len(per_mu.paths_) == len(CENTRAL_PATH)
    np.testing.assert_allclose(per_mu.lambda1_range_, model.lambda1_range_, rtol=1e-12)  # the μ = 1 path's range
    np.testing.assert_allclose(per_mu.lambda1_range_, per_mu.path_.lambda_range, rtol=1e-12)
    assert DagFlow(mu=1.0, lambda_min_ratio=0.01).fit(X).lambda1_range_ == per_mu.path_.lambda_range
    for bad, err in [(0, ValueError), (1.5, TypeError), (True, TypeError), ("8", TypeError)]:
        with pytest.raises(err, match="anchors"):
            DagFlow(anchors=bad).fit(X)
    with pytest.raises(ValueError, match="decreasing"):
        DagFlow(mu=(0.1, 1.0)).fit(X)
    assert len(DagFlow(mu=(0.1, 1.0), anchors=None, lambda_min_ratio=0.05).fit(X).paths_) == 2
