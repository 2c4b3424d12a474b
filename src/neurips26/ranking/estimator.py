"""scikit-learn face of pairwise AUC training: a linear model or an MLP trained on an exact
pairwise surrogate over class-balanced minibatches, after an optional cross-entropy warm-up."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from .._checks import check_int, check_real
from .losses import SURROGATES
from .training import train_scorer

__all__ = ["PairwiseAUCClassifier", "mlp"]


def mlp(n_features: int, hidden: tuple[int, ...] = (), dtype=torch.float32) -> torch.nn.Sequential:
    """A scoring MLP n_features -> hidden... -> 1 with ReLU; ``hidden=()`` is a linear model."""
    layers, width = [], n_features
    for h in hidden:
        layers += [torch.nn.Linear(width, h, dtype=dtype), torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, 1, dtype=dtype))
    return torch.nn.Sequential(*layers)


class PairwiseAUCClassifier(ClassifierMixin, BaseEstimator):
    """Binary classifier trained to maximize AUC with an exact pairwise surrogate.

    Parameters: ``surrogate`` (one of :data:`~neurips26.ranking.SURROGATES`), ``margin``,
    ``hidden`` (widths of the MLP's hidden layers; ``()`` is linear), ``warmup`` (``"ce"`` for
    ``warmup_epochs`` of cross-entropy first, ``None`` for none), ``epochs`` of the pairwise phase,
    ``lr``, ``batch_size`` and ``pos_fraction`` (positives per batch, :class:`DualSampler`),
    ``optimizer`` (``"adam"`` / ``"sgd"``), ``weight_decay``, ``random_state``.

    Features are standardized internally. ``decision_function`` returns the model's scores (n,);
    ``predict_proba`` (n, 2) calibrates them with Platt scaling (a logistic regression on the
    training scores, since a pairwise loss fixes scores only up to a monotone map); ``score`` is
    the AUC (the metric this estimator optimizes), not accuracy."""

    def __init__(self, surrogate: str = "squared_hinge", margin: float = 1.0, hidden: tuple = (),
                 warmup: str | None = "ce", warmup_epochs: int = 5, epochs: int = 30, lr: float = 1e-2,
                 batch_size: int = 64, pos_fraction: float = 0.25, optimizer: str = "adam",
                 weight_decay: float = 0.0, random_state=None):
        self.surrogate = surrogate
        self.margin = margin
        self.hidden = hidden
        self.warmup = warmup
        self.warmup_epochs = warmup_epochs
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.pos_fraction = pos_fraction
        self.optimizer = optimizer
        self.weight_decay = weight_decay
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _check_params(self):
        if self.surrogate not in SURROGATES:
            raise ValueError(f"surrogate must be one of {SURROGATES}, got {self.surrogate!r}")
        if self.warmup not in ("ce", None):
            raise ValueError(f"warmup must be 'ce' or None, got {self.warmup!r}")
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")
        hidden = tuple(self.hidden)
        for h in hidden:
            check_int("hidden", h, 1)
        check_int("warmup_epochs", self.warmup_epochs, 0)
        check_int("epochs", self.epochs, 0)
        check_int("batch_size", self.batch_size, 2)
        check_real("lr", self.lr, low=0.0, low_open=True)
        check_real("margin", self.margin, low=0.0)
        check_real("pos_fraction", self.pos_fraction, low=0.0, low_open=True, high=1.0, high_open=True)
        check_real("weight_decay", self.weight_decay, low=0.0)
        return hidden

    def fit(self, X, y):
        """Fit on ``X`` (n, d) and binary labels ``y`` (n,) (any two values; the larger one, in
        sorted order, is the positive class)."""
        hidden = self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        classes, yi = np.unique(y, return_inverse=True)
        if len(classes) == 1:
            raise ValueError("y holds one class only: a pairwise AUC loss needs both classes")
        if type_of_target(y) != "binary":
            raise ValueError(f"Only binary classification is supported. y has {len(classes)} classes")
        self.classes_ = classes
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(0, 2**31 - 1))
        self.mean_ = X.mean(0)
        scale = X.std(0)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        Xt = torch.as_tensor((X - self.mean_) / self.scale_, dtype=torch.float32)
        yt = torch.as_tensor(yi, dtype=torch.int64)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model_ = mlp(X.shape[1], hidden)
            self.history_ = train_scorer(
                self.model_, Xt, yt, loss=self.surrogate, margin=self.margin, epochs=self.epochs,
                warmup_epochs=self.warmup_epochs if self.warmup == "ce" else 0, lr=self.lr,
                batch_size=min(self.batch_size, len(yi)), pos_fraction=self.pos_fraction,
                optimizer=self.optimizer, weight_decay=self.weight_decay, seed=seed)
        s = self._scores(X)
        if not np.all(np.isfinite(s)):
            raise FloatingPointError("training diverged (non-finite scores): lower lr")
        platt = LogisticRegression().fit(s[:, None], yi)
        if platt.coef_[0, 0] < 0:  # a model worse than chance on its own training data: keep the
            platt.coef_[0, 0] = 0.0  # map monotone non-decreasing (probabilities = the class prior)
            platt.intercept_[0] = float(np.log(yi.mean() / (1 - yi.mean())))
        self.platt_ = platt
        return self

    def _scores(self, X) -> np.ndarray:
        with torch.no_grad():
            Xt = torch.as_tensor((X - self.mean_) / self.scale_, dtype=torch.float32)
            return self.model_(Xt).reshape(-1).double().numpy()

    def raw_scores(self, X) -> np.ndarray:
        """The model's scores (n,) as trained (a pairwise loss fixes them up to a monotone map)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self._scores(X)

    def decision_function(self, X) -> np.ndarray:
        """Calibrated log-odds (n,) of the positive class ``classes_[1]``: Platt's increasing affine
        map of :meth:`raw_scores`, so it ranks (and has the AUC) exactly as the raw scores."""
        s = self.raw_scores(X)  # checks fitted before platt_ is read
        return self.platt_.decision_function(s[:, None])

    def predict_proba(self, X) -> np.ndarray:
        """(n, 2) class probabilities from Platt scaling of the scores."""
        s = self.raw_scores(X)
        return self.platt_.predict_proba(s[:, None])

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self)
        return self.classes_[(self.decision_function(X) > 0).astype(int)]

    def score(self, X, y, sample_weight=None) -> float:
        """ROC AUC of the scores against ``y`` (the metric this estimator optimizes)."""
        return float(roc_auc_score(y, self.raw_scores(X), sample_weight=sample_weight))
