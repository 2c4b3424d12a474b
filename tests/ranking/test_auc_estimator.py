"""PairwiseAUCClassifier: scikit-learn's estimator checks, AUC on an imbalanced problem against
LogisticRegression, determinism, and bad settings."""

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.utils.estimator_checks import check_estimator

from neurips26.ranking import PairwiseAUCClassifier


def test_sklearn_estimator_checks():
    est = PairwiseAUCClassifier(epochs=4, warmup_epochs=2, batch_size=32, random_state=0)
    failures = [c for c in check_estimator(est, on_fail=None) if c["status"] == "failed"]
    assert not failures, [(c["check_name"], str(c["exception"])[:200]) for c in failures]


def test_imbalanced_auc_matches_logistic_regression():
    X, y = make_classification(n_samples=1500, n_features=10, n_informative=5, weights=[0.95], flip_y=0.0,
                               class_sep=0.8, random_state=0)
    Xtr, Xte, ytr, yte = X[:1000], X[1000:], y[:1000], y[1000:]
    ref = roc_auc_score(yte, LogisticRegression(max_iter=1000).fit(Xtr, ytr).decision_function(Xte))
    est = PairwiseAUCClassifier(epochs=15, warmup_epochs=3, lr=0.01, random_state=1).fit(Xtr, ytr)
    assert est.score(Xte, yte) > ref - 0.02, (est.score(Xte, yte), ref)
    p = est.predict_proba(Xte)
    assert p.shape == (500, 2) and np.allclose(p.sum(1), 1)
    # Platt scaling is monotone: probabilities rank exactly as the scores.
    assert roc_auc_score(yte, p[:, 1]) == pytest.approx(est.score(Xte, yte), abs=1e-12)
    again = PairwiseAUCClassifier(epochs=15, warmup_epochs=3, lr=0.01, random_state=1).fit(Xtr, ytr)
    assert np.array_equal(again.decision_function(Xte), est.decision_function(Xte))
    labels = np.where(ytr == 1, "yes", "no")  # any two labels; the larger sorted one is positive
    est2 = PairwiseAUCClassifier(hidden=(8,), epochs=3, warmup=None, random_state=0).fit(Xtr, labels)
    assert set(est2.predict(Xte)) <= {"yes", "no"} and list(est2.classes_) == ["no", "yes"]


@pytest.mark.parametrize("kw,err,match", [
    (dict(surrogate="focal"), ValueError, "surrogate"),
    (dict(warmup="mse"), ValueError, "warmup"),
    (dict(lr=-1.0), ValueError, "lr"),
    (dict(lr=float("nan")), ValueError, "lr"),
    (dict(epochs=2.5), TypeError, "epochs"),
    (dict(hidden=(0,)), ValueError, "hidden"),
    (dict(pos_fraction=0.0), ValueError, "pos_fraction"),
    (dict(batch_size=1), ValueError, "batch_size"),
])
def test_bad_settings(kw, err, match):
    X, y = make_classification(n_samples=60, random_state=0)
    with pytest.raises(err, match=match):
        PairwiseAUCClassifier(**kw).fit(X, y)


def test_bad_data():
    X, y = make_classification(n_samples=60, n_classes=3, n_informative=3, random_state=0)
    with pytest.raises(ValueError, match="binary"):
        PairwiseAUCClassifier(epochs=1).fit(X, y)
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        PairwiseAUCClassifier(epochs=1).fit(X, y % 2)
