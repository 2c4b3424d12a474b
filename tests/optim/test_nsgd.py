import copy
import io
import itertools

import pytest
import torch

from neurips26.linalg import polar
from neurips26.optim import NSGD, L2, Blocks, Linf, Spectral, get_norm

NORMS = [L2(), Linf(), Spectral()]


@pytest.mark.parametrize("norm", NORMS, ids=lambda n: n.name)
def test_lmo_attains_the_dual_norm_and_is_feasible(norm):
    g = torch.randn(7, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    d = norm.lmo(g)
    torch.testing.assert_close((g * d).sum(), norm.dual_norm(g), atol=1e-10, rtol=1e-10)
    assert norm.norm(d) <= 1 + 1e-10
    # No unit-norm direction does better (random directions, rescaled onto the unit sphere).
    for _ in range(200):
        r = torch.randn(7, 5, dtype=torch.float64)
        r = r / norm.norm(r)
        assert (g * r).sum() <= norm.dual_norm(g) + 1e-10


def test_linf_lmo_is_sign_and_dual_is_l1_by_enumeration():
    g = torch.tensor([0.3, -1.2, 0.0, 2.0], dtype=torch.float64)
    assert torch.equal(Linf().lmo(g), torch.sign(g))
    # The ℓ∞ ball's vertices: the maximum of ⟨g, v⟩ over all 2^4 of them is ‖g‖₁.
    best = max(float(g @ torch.tensor(v, dtype=torch.float64)) for v in itertools.product([-1.0, 1.0], repeat=4))
    assert best == pytest.approx(float(Linf().dual_norm(g)))


def test_spectral_lmo_is_the_polar_factor_and_msign_is_close():
    g = torch.randn(16, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(Spectral().lmo(g), polar(g))
    s = torch.linalg.svdvals(Spectral(exact=False).lmo(g))
    assert s.min() > 0.5 and s.max() < 1.3
    conv = torch.randn(4, 3, 2, 2, dtype=torch.float64)
    d = Spectral().lmo(conv)
    assert d.shape == conv.shape
    torch.testing.assert_close((conv * d).sum(), Spectral().dual_norm(conv))
    with pytest.raises(ValueError, match="matrix"):
        Spectral().lmo(torch.ones(3))


def test_zero_gradient_gives_zero_direction():
    for norm in NORMS:
        assert torch.equal(norm.lmo(torch.zeros(3, 3)), torch.zeros(3, 3))


def test_nsgd_step_closed_form_without_momentum():
    p = torch.nn.Parameter(torch.tensor([3.0, -4.0]))
    opt = NSGD([p], lr=0.5, beta=0.0, norm="l2")
    p.grad = torch.tensor([3.0, 4.0])
    opt.step()
    torch.testing.assert_close(p.detach(), torch.tensor([3.0 - 0.3, -4.0 - 0.4]))
    opt = NSGD([p], lr=0.1, beta=0.0, norm="linf", weight_decay=0.5)
    before = p.detach().clone()
    opt.step()
    torch.testing.assert_close(p.detach(), before * (1 - 0.05) - 0.1 * torch.sign(p.grad))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _train(model, opt, steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(16, 4, generator=g)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


@pytest.mark.parametrize("norm", ["l2", "linf", "spectral-mixed"])
def test_state_dict_round_trip_resumes_identically(norm):
    spec = (lambda p: Spectral() if p.ndim >= 2 else Linf()) if norm == "spectral-mixed" else norm
    a = _model()
    opt_a = NSGD(a.parameters(), lr=0.01, beta=0.9, norm=spec, nesterov=True)
    _train(a, opt_a, 5)
    b = _model()
    b.load_state_dict(a.state_dict())
    opt_b = NSGD(b.parameters(), lr=0.5, beta=0.1, norm=spec)
    if norm != "spectral-mixed":  # named norms survive a real torch.save round trip
        buf = io.BytesIO()
        torch.save(opt_a.state_dict(), buf)
        buf.seek(0)
        opt_b.load_state_dict(torch.load(buf, weights_only=False))
    else:  # in memory, the state dict shares the momentum tensors: copy it, as torch advises
        opt_b.load_state_dict(copy.deepcopy(opt_a.state_dict()))
    _train(a, opt_a, 5, seed=1)
    _train(b, opt_b, 5, seed=1)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


def test_nsgd_decreases_a_loss_and_validates():
    m = _model()
    first = _train(m, NSGD(m.parameters(), lr=0.02), 1)
    last = _train(m, NSGD(m.parameters(), lr=0.02), 200)
    assert last < first
    with pytest.raises(ValueError, match="learning rate"):
        NSGD(m.parameters(), lr=0)
    with pytest.raises(ValueError, match="beta"):
        NSGD(m.parameters(), beta=1.0)
    with pytest.raises(ValueError, match="norm must be"):
        NSGD(m.parameters(), norm="l1")
    with pytest.raises(ValueError, match="norm must be"):
        get_norm(3)


def test_blocks_norm_is_the_max_of_block_norms_with_summed_duals():
    shapes = [(6, 4), (4,), (3, 2, 2)]
    blocks = Blocks(shapes, [Spectral(), Linf(), Spectral()])
    gen = torch.Generator().manual_seed(5)
    g = torch.randn(6 * 4 + 4 + 12, dtype=torch.float64, generator=gen)
    d = blocks.lmo(g)
    parts = torch.split(g, [24, 4, 12])
    expected = torch.cat([polar(parts[0].reshape(6, 4)).reshape(-1), torch.sign(parts[1]),
                          polar(parts[2].reshape(3, 4)).reshape(-1)])
    torch.testing.assert_close(d, expected)
    torch.testing.assert_close((g * d).sum(), blocks.dual_norm(g))
    torch.testing.assert_close(blocks.norm(d), torch.tensor(1.0, dtype=torch.float64))
    # No unit-norm direction does better.
    for _ in range(100):
        r = torch.randn(40, dtype=torch.float64, generator=gen)
        assert (g * r).sum() / blocks.norm(r) <= blocks.dual_norm(g) + 1e-10
    with pytest.raises(ValueError, match="flat vector of 40"):
        blocks.lmo(torch.ones(39))
    with pytest.raises(ValueError, match="one norm per shape"):
        Blocks(shapes, ["l2"])
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Linear(5, 2))
    auto = Blocks.for_parameters(model.parameters())
    assert [n.name for n in auto.norms] == ["spectral", "l2", "spectral", "l2"]
