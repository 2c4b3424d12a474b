"""Fenchel–Young gradients through RLNS against enumeration, the exact loss and PyEPO."""

import itertools

import numpy as np
import pytest
import torch

from neurips26.combinatorial import (RLNS, Entropic, FenchelYoungLoss, KSubset, Perturbed, RandomBlock,
                                     exact_fenchel_young_ksubset, gibbs)

N, K_ITEMS, BLOCK = 8, 3, 2


def instance(seed=0, batch=2):
    rng = np.random.default_rng(seed)
    prob = KSubset(N, K_ITEMS)
    theta = rng.normal(size=(batch, N))
    y = prob.random_feasible(rng, batch)
    return prob, theta, y


def neg_block_pseudolikelihood(theta, y, size):
    """E_S[−log p(y_S | y_−S)] by enumeration: S uniform over the blocks of ``size``
    positions, the conditional over the completions of S that keep Σy = k."""
    losses = []
    for b in range(len(y)):
        terms = []
        for S in itertools.combinations(range(N), size):
            S = list(S)
            count = int(y[b, S].sum())
            completions = [c for c in itertools.product((0, 1), repeat=size) if sum(c) == count]
            scores = torch.stack([(theta[b, S] * torch.tensor(c, dtype=theta.dtype)).sum() for c in completions])
            terms.append(torch.logsumexp(scores, 0) - (theta[b, S] * torch.tensor(y[b, S], dtype=theta.dtype)).sum())
        losses.append(torch.stack(terms).mean())
    return torch.stack(losses).mean()


def sampled_grad(loss_fn, theta, y):
    t = torch.tensor(theta, requires_grad=True)
    loss_fn(t, y).backward()
    return t.grad.numpy()


def test_one_step_from_the_label_is_the_block_pseudolikelihood_gradient():
    prob, theta, y = instance()
    t = torch.tensor(theta, requires_grad=True)
    neg_block_pseudolikelihood(t, y, BLOCK).backward()
    exact = t.grad.numpy()
    chains = 40_000
    fy = FenchelYoungLoss(RLNS(prob, RandomBlock(BLOCK), Entropic(1.0)), steps=1, chains=chains, seed=1)
    est = sampled_grad(fy, theta, y)
    # per coordinate the estimate is a mean of Bernoulli-like values / batch: SE ≤ 0.5/√chains/batch
    assert np.abs(est - exact).max() < 5 * 0.5 / np.sqrt(chains) / len(y) + 1e-12
    assert np.abs(exact).max() > 0.02  # not a trivially zero gradient


def test_many_steps_approach_the_exact_mle_gradient():
    prob, theta, y = instance(2)
    states = prob.enumerate().astype(float)
    exact = np.stack([gibbs(states, th) @ states - yb for th, yb in zip(theta, y)]) / len(y)
    fy = FenchelYoungLoss(RLNS(prob, RandomBlock(BLOCK), Entropic(1.0)), steps=60, chains=20_000, seed=3)
    assert np.abs(sampled_grad(fy, theta, y) - exact).max() < 0.01
    # and one step from the label is measurably different from the MLE gradient
    fy1 = FenchelYoungLoss(RLNS(prob, RandomBlock(BLOCK), Entropic(1.0)), steps=1, chains=20_000, seed=3)
    assert np.abs(sampled_grad(fy1, theta, y) - exact).max() > 0.03


def test_the_exact_k_subset_loss_is_nonnegative_and_its_gradient_is_the_expectation_gap():
    prob, theta, y = instance(4, batch=3)
    t = torch.tensor(theta, requires_grad=True)
    yt = torch.tensor(y, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda th: exact_fenchel_young_ksubset(th, yt, K_ITEMS, 0.7), (t,))
    loss = exact_fenchel_young_ksubset(t, yt, K_ITEMS)
    assert loss.item() >= 0
    loss.backward()
    states = prob.enumerate().astype(float)
    expected = np.stack([gibbs(states, th) @ states - yb for th, yb in zip(theta, y)]) / len(y)
    assert np.allclose(t.grad.numpy(), expected, atol=1e-10)


def test_global_perturbed_rlns_matches_pyepo_perturbed_fenchel_young():
    """With the whole solution freed (block = n) and Gaussian noise, one RLNS step is the
    perturbed optimizer of Berthet et al.; PyEPO's PFY with an exact top-k model must give
    the same gradient (up to Monte Carlo error). Gradients only: PyEPO's forward value is
    not the Fenchel–Young value."""
    pyepo = pytest.importorskip("pyepo")
    from pyepo import EPO
    from pyepo.model.opt import optModel

    class TopK(optModel):
        def _getModel(self):
            self.modelSense = EPO.MAXIMIZE
            return None, list(range(N))

        def setObj(self, c):
            self.c = np.asarray(c, dtype=float)

        def solve(self):
            sol = np.zeros(N)
            sol[np.argsort(-self.c)[:K_ITEMS]] = 1
            return sol, float(self.c @ sol)

    prob, theta, y = instance(5, batch=3)
    sigma, samples = 0.8, 20_000
    pfy = pyepo.func.perturbedFenchelYoung(TopK(), n_samples=samples, sigma=sigma, seed=0)
    t = torch.tensor(theta, requires_grad=True)
    pfy(t, torch.tensor(y, dtype=torch.float64)).backward()
    ours = FenchelYoungLoss(RLNS(prob, RandomBlock(N), Perturbed(sigma, "gaussian")), steps=1, chains=samples, seed=0)
    est = sampled_grad(ours, theta, y)
    assert np.abs(est - t.grad.numpy()).max() < 5 * 0.5 * np.sqrt(2 / samples) / len(y)
    assert np.abs(est).max() > 0.05


def test_bad_input_is_refused():
    prob, theta, y = instance()
    fy = FenchelYoungLoss(RLNS(prob))
    with pytest.raises(ValueError, match="shape"):
        fy(torch.zeros(2, N + 1), y)
    with pytest.raises(ValueError, match="NaN"):
        fy(torch.full((2, N), float("nan")), y)
    with pytest.raises(ValueError, match="steps"):
        FenchelYoungLoss(RLNS(prob), steps=0)
