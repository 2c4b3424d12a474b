"""Exact pairwise surrogates against brute force over the explicit pair matrix and against
LibAUC 2.0.1's PairwiseAUCLoss; the empirical AUC against scikit-learn; bad input."""

import itertools

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from neurips26.ranking import SURROGATES, DualSampler, PairwiseAUCLoss, empirical_auc, pairwise_auc_loss


def brute(scores, y, surrogate, margin):
    """O(n₊ n₋) mean over the explicit pair matrix, differentiated by autograd (torch.maximum's
    half-subgradient at the hinge's kink, as LibAUC)."""
    t = scores[y == 1][:, None] - scores[y != 1][None, :]
    zero = torch.zeros_like(t)
    v = {"squared_hinge": lambda: torch.maximum(margin - t, zero) ** 2,
         "hinge": lambda: torch.maximum(margin - t, zero),
         "squared": lambda: (margin - t) ** 2,
         "exponential": lambda: torch.exp(-margin * t),
         "logistic": lambda: torch.nn.functional.softplus(-margin * t)}[surrogate]()
    return v.mean()


def _data(n_pos, n_neg, seed, ties):
    g = torch.Generator().manual_seed(seed)
    if ties:  # a half-integer grid: score ties and pairs exactly at the margin's kink
        s = torch.randint(-4, 5, (n_pos + n_neg,), generator=g).double() / 2
    else:
        s = torch.randn(n_pos + n_neg, generator=g, dtype=torch.float64) * 1.5
    y = torch.cat([torch.ones(n_pos), torch.zeros(n_neg)]).long()
    perm = torch.randperm(n_pos + n_neg, generator=g)
    return s[perm], y[perm]


@pytest.mark.parametrize("surrogate", SURROGATES)
@pytest.mark.parametrize("n_pos,n_neg", list(itertools.product([1, 7, 500], [1, 300, 2000])))
def test_exact_equals_brute_force(surrogate, n_pos, n_neg):
    for ties, margin in ((True, 1.0), (False, 0.7)):
        s, y = _data(n_pos, n_neg, n_pos * 31 + n_neg, ties)
        s1 = s.clone().requires_grad_(True)
        s2 = s.clone().requires_grad_(True)
        ours = pairwise_auc_loss(s1, y, surrogate, margin)
        ref = brute(s2, y, surrogate, margin)
        g1, = torch.autograd.grad(ours, s1)
        g2, = torch.autograd.grad(ref, s2)
        assert torch.allclose(ours, ref, rtol=1e-10, atol=0), (float(ours), float(ref))
        scale = g2.abs().max()
        assert torch.allclose(g1, g2, rtol=1e-10, atol=1e-12 * float(scale)), float((g1 - g2).abs().max())


@pytest.mark.parametrize("surrogate", SURROGATES)
def test_sum_reduction_and_labels(surrogate):
    s, y = _data(20, 50, 3, True)
    mean = pairwise_auc_loss(s, y, surrogate)
    total = PairwiseAUCLoss(surrogate, reduction="sum")(s[:, None], y[:, None])
    assert torch.allclose(total, mean * 1000, rtol=1e-12)
    pm = pairwise_auc_loss(s, 2 * y - 1, surrogate)  # {-1, 1} labels
    pb = pairwise_auc_loss(s, y.bool(), surrogate)
    assert torch.equal(pm, mean) and torch.equal(pb, mean)


@pytest.mark.parametrize("surrogate", ["squared_hinge", "hinge", "squared", "logistic"])
def test_equals_libauc(surrogate):
    LibAUC = pytest.importorskip("libauc.losses", reason="LibAUC (pip install --no-deps libauc)").PairwiseAUCLoss

    for seed, (n_pos, n_neg) in enumerate([(7, 300), (40, 60), (1, 25)]):
        s, y = _data(n_pos, n_neg, seed, ties=seed % 2 == 0)
        for margin in (1.0, 0.5):
            s1 = s.clone().requires_grad_(True)
            s2 = s.clone().requires_grad_(True)
            ours = PairwiseAUCLoss(surrogate, margin)(s1, y)
            ref = LibAUC(surr_loss=surrogate, hparam=margin)(s2, y)
            g1, = torch.autograd.grad(ours, s1)
            g2, = torch.autograd.grad(ref, s2)
            assert abs(float(ours.detach()) - float(ref.detach())) <= 1e-12 * max(1.0, abs(float(ref)))
            assert float((g1 - g2).abs().max()) <= 1e-12


def test_float32_and_large_scores_stay_finite():
    s, y = _data(50, 500, 9, False)
    out = pairwise_auc_loss((s * 100).float(), y, "exponential", 0.1)
    ref = brute((s * 100), y, "exponential", 0.1)
    assert torch.isfinite(out) and abs(float(out) / float(ref) - 1) < 1e-4
    out = pairwise_auc_loss(s.float() + 1e4, y, "squared_hinge")  # a large common offset
    assert abs(float(out) / float(brute(s, y, "squared_hinge", 1.0)) - 1) < 1e-4


def test_empirical_auc_equals_sklearn():
    for seed in range(5):
        s, y = _data(30 + seed, 200, seed, ties=seed % 2 == 0)
        assert abs(empirical_auc(s, y) - roc_auc_score(y.numpy(), s.numpy())) <= 1e-12
    assert empirical_auc(np.array([0.1, 0.1, 0.1]), np.array([1, 0, 0])) == 0.5


@pytest.mark.parametrize("bad,match", [
    (lambda s, y: (s, torch.ones_like(y)), "one class"),
    (lambda s, y: (s, torch.zeros_like(y)), "one class"),
    (lambda s, y: (s, y * 2), "labels"),
    (lambda s, y: (s, y.double() + 0.5), "labels"),
    (lambda s, y: (torch.where(y == 1, float("nan"), s), y), "NaN"),
    (lambda s, y: (torch.where(y == 1, float("inf"), s), y), "NaN or inf"),
    (lambda s, y: (s, y[:-1]), "shape"),
    (lambda s, y: (s[:, None].expand(-1, 2), y), "shape"),
    (lambda s, y: (s[:0], y[:0]), "empty"),
    (lambda s, y: (s, torch.cat([y[:3] - 1, y[3:]])), "mixes"),
])
def test_bad_input(bad, match):
    s, y = _data(5, 10, 0, False)
    s[:2], y[:2] = 0.0, torch.tensor([0, 1])
    args = bad(s, y)
    with pytest.raises(ValueError, match=match):
        pairwise_auc_loss(*args)


def test_bad_settings():
    s, y = _data(5, 10, 0, False)
    with pytest.raises(ValueError, match="surrogate"):
        PairwiseAUCLoss("focal")
    with pytest.raises(ValueError, match="reduction"):
        PairwiseAUCLoss(reduction="none")
    with pytest.raises(ValueError, match="margin"):
        PairwiseAUCLoss("logistic", margin=0.0)
    with pytest.raises(ValueError, match="margin"):
        PairwiseAUCLoss(margin=float("nan"))
    with pytest.raises(TypeError, match="floating"):
        pairwise_auc_loss(torch.arange(15), y)
    with pytest.raises(ValueError, match="one class"):
        empirical_auc([0.1, 0.2], [1, 1])


def test_dual_sampler_fixes_positive_share():
    y = torch.zeros(1000, dtype=torch.long)
    y[torch.randperm(1000, generator=torch.Generator().manual_seed(0))[:23]] = 1
    sm = DualSampler(y, batch_size=40, pos_fraction=0.25, seed=3)
    idx = torch.tensor(list(sm)).reshape(-1, 40)
    assert len(sm) == idx.numel() and idx.shape[0] == sm.num_batches == -(-977 // 30)
    assert torch.all((y[idx] == 1).sum(1) == 10)
    negs = idx[y[idx] == 0]
    assert set(negs.tolist()) == set(torch.nonzero(y == 0).reshape(-1).tolist())  # every negative visited
    pos_seen = idx[y[idx] == 1]
    assert len(set(pos_seen[:20].tolist())) == 20  # no repeat within a cycle of the 23 positives
    counts = torch.bincount(pos_seen, minlength=1000)[y == 1]
    assert counts.min() >= 330 // 23 and counts.max() <= 330 // 23 + 1  # oversampled evenly
    assert torch.equal(torch.tensor(list(DualSampler(y, 40, 0.25, seed=3))), idx.reshape(-1))
    assert not torch.equal(torch.tensor(list(sm)), idx.reshape(-1))  # a new epoch, a new order
    with pytest.raises(ValueError, match="one class"):
        DualSampler(torch.zeros(10), 4)
    with pytest.raises(ValueError, match="pos_fraction"):
        DualSampler(y, 4, pos_fraction=1.0)
    with pytest.raises(ValueError, match="labels"):
        DualSampler(y + 3, 4)
