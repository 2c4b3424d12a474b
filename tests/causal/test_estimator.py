"""DagFlow under scikit-learn's estimator contract: the library's own checks
(``parametrize_with_checks``), and, for the checks that only look at predict / transform /
score (which a graph learner does not have), the same properties on the graph it learns."""

import inspect
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks

from neurips26.causal import CENTRAL_PATH, DagFlow, is_acyclic

# DAG learning is unsupervised (fit(X), no y) and its output is a graph (``adjacency_``),
# not predictions: these checks run, but test nothing here, because every assertion they
# make is about predict / transform / decision_function / predict_proba / score, which
# DagFlow does not have. The tests below check the same properties on ``adjacency_``.
NOT_APPLICABLE = {
    "check_estimators_unfitted": "predict & co. on an unfitted estimator (see test_queries_before_fit_raise_not_fitted)",
    "check_fit_idempotent": "predict & co. after refitting (see test_refitting_gives_the_same_paths_and_graph)",
    "check_methods_sample_order_invariance": "predict & co. on permuted rows (see test_the_graph_does_not_depend_on_row_order)",
    "check_methods_subset_invariance": "predict & co. on subsets of rows: a graph has no per-sample output",
    "check_dict_unchanged": "predict & co. must not change the estimator's __dict__",
    "check_fit2d_predict1d": "predict & co. on 1-d input",
    "check_pipeline_consistency": "score / fit_transform inside a Pipeline",
}
# Every applicable check passes: none is expected to fail. (``check_array_api_input`` skips
# itself: DagFlow works in numpy / float64 torch, not on array-API inputs.)
EXPECTED_FAILED_CHECKS: dict[str, str] = {}


@parametrize_with_checks([DagFlow()], expected_failed_checks=lambda estimator: EXPECTED_FAILED_CHECKS)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_the_not_applicable_list_names_checks_that_scikit_learn_runs():
    results = check_estimator(DagFlow(), on_fail=None, on_skip=None)
    assert set(NOT_APPLICABLE) <= {r["check_name"] for r in results}


def sem_data(n=150, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] += 0.8 * X[:, 0]
    X[:, 3] += 0.5 * X[:, 1] - 0.7 * X[:, 2]
    X[:, 4] += 0.6 * X[:, 3]
    return X


def test_init_stores_only_and_fit_validates():
    model = DagFlow("pc", mu=(1.0, -1.0), threshold=-1)  # no error yet: scikit-learn's contract
    assert model.get_params()["formulation"] == "pc" and model.get_params()["mu"] == (1.0, -1.0)
    X = sem_data()
    for params, match in [({"formulation": "pc"}, "formulation"), ({"mu": (1.0, 0.0)}, "mu"),
                          ({"formulation": "notears", "mu": (1.0, 0.1)}, "dagma"), ({"threshold": 0.0}, "threshold"),
                          ({"lambda_min_ratio": 1.0}, "lambda_min_ratio"), ({"max_step": 0.0}, "max_step"),
                          ({"criterion": "aic"}, "criterion"), ({"min_stability": 2.0}, "min_stability"),
                          ({"anchors": 0}, "anchors")]:
        with pytest.raises(ValueError, match=match):
            DagFlow(**params).fit(X)
    with pytest.raises(TypeError, match="threshold"):
        DagFlow(threshold=None).fit(X)
    with pytest.raises(ValueError, match="constant"):
        DagFlow().fit(np.column_stack([X, np.ones(len(X))]))


def test_get_params_set_params_and_clone_round_trip():
    model = DagFlow("dagma", mu=(1.0, 0.1), lambda_min_ratio=0.05, criterion="stability")
    twin = clone(model)
    assert twin.get_params() == model.get_params() and twin is not model
    twin.set_params(formulation="lasso", mu=1.0)
    assert twin.formulation == "lasso" and model.formulation == "dagma"


def test_queries_before_fit_raise_not_fitted():
    model = DagFlow()
    for query in (lambda: model.select(), model.candidate_graphs, lambda: model.graph_at(1.0)):
        with pytest.raises(NotFittedError):
            query()


def test_the_fitted_graph_is_the_selected_one():
    X = sem_data()
    model = DagFlow("dagma", lambda_min_ratio=0.05).fit(X)
    assert model.n_features_in_ == 5 and model.mus_ == CENTRAL_PATH and model.lambda_min_ratio_ == 0.05
    assert model.adjacency_.shape == (5, 5) and is_acyclic(model.adjacency_)
    assert np.array_equal(model.adjacency_, model.select("bic"))
    stable = DagFlow("dagma", lambda_min_ratio=0.05, criterion="stability").fit(X)
    assert np.array_equal(stable.adjacency_, stable.select("stability"))
    assert np.array_equal(stable.select("bic"), model.adjacency_)


def test_refitting_gives_the_same_paths_and_graph():
    X = sem_data()
    model = DagFlow("dagma", lambda_min_ratio=0.05)
    first = model.fit(X)
    lambdas, weights, A = first.path_.lambdas.copy(), first.path_.weights.copy(), first.adjacency_.copy()
    model.fit(X)
    assert np.array_equal(model.path_.lambdas, lambdas) and np.array_equal(model.path_.weights, weights)
    assert np.array_equal(model.adjacency_, A)
    restored = pickle.loads(pickle.dumps(model))
    assert np.array_equal(restored.adjacency_, A) and np.array_equal(restored.select(), A)


def test_the_graph_does_not_depend_on_row_order():
    X = sem_data()
    perm = np.random.default_rng(1).permutation(len(X))
    a = DagFlow("dagma", lambda_min_ratio=0.05).fit(X)
    b = DagFlow("dagma", lambda_min_ratio=0.05).fit(X[perm])
    assert np.array_equal(a.adjacency_, b.adjacency_)


def test_the_default_mu_schedule_is_dagmas_own_central_path():
    # the dagma package's DagmaLinear.fit defaults: μ_t = mu_init · mu_factor^t for t < T
    dagma_linear = pytest.importorskip("dagma.linear")
    p = inspect.signature(dagma_linear.DagmaLinear.fit).parameters
    expected = [p["mu_init"].default * p["mu_factor"].default ** t for t in range(p["T"].default)]
    np.testing.assert_allclose(CENTRAL_PATH, expected, rtol=1e-12)
    X = sem_data()
    model = DagFlow(lambda_min_ratio=0.05, anchors=None).fit(X)
    assert model.mus_ == CENTRAL_PATH and len(model.paths_) == len(CENTRAL_PATH)
    assert DagFlow(lambda_min_ratio=0.05).fit(X).mus_ == CENTRAL_PATH  # the anchored path: one, of the last μ
    assert DagFlow("lasso", lambda_min_ratio=0.05).fit(X).mus_ == (1.0,)  # μ is DAGMA's alone
    single = DagFlow(mu=1.0, lambda_min_ratio=0.05).fit(X)
    np.testing.assert_array_equal(single.path_.lambdas, model.path_.lambdas)  # the first path is μ = 1's
