"""The norms of neurips26.geometry: each LMO attains the dual norm on the unit ball."""

import itertools

import pytest
import torch

from neurips26.geometry import L2, Blocks, Linf, Spectral, get_norm
from neurips26.linalg import polar

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


def test_blocks_norm_is_the_max_of_block_norms_with_summed_duals():
    shapes = [(6, 4), (4,), (3, 2, 2)]
    blocks = Blocks(shapes, [Spectral(), Linf(), Spectral()])
    generator = torch.Generator().manual_seed(5)
    g = torch.randn(6 * 4 + 4 + 12, dtype=torch.float64, generator=generator)
    d = blocks.lmo(g)
    parts = torch.split(g, [24, 4, 12])
    expected = torch.cat([polar(parts[0].reshape(6, 4)).reshape(-1), torch.sign(parts[1]),
                          polar(parts[2].reshape(3, 4)).reshape(-1)])
    torch.testing.assert_close(d, expected)
    torch.testing.assert_close((g * d).sum(), blocks.dual_norm(g))
    torch.testing.assert_close(blocks.norm(d), torch.tensor(1.0, dtype=torch.float64))
    # No unit-norm direction does better.
    for _ in range(100):
        r = torch.randn(40, dtype=torch.float64, generator=generator)
        assert (g * r).sum() / blocks.norm(r) <= blocks.dual_norm(g) + 1e-10
    with pytest.raises(ValueError, match="flat vector of 40"):
        blocks.lmo(torch.ones(39))
    with pytest.raises(ValueError, match="one norm per shape"):
        Blocks(shapes, ["l2"])
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Linear(5, 2))
    auto = Blocks.for_parameters(model.parameters())
    assert [n.name for n in auto.norms] == ["spectral", "l2", "spectral", "l2"]



@pytest.mark.parametrize("norm", NORMS + [Spectral(exact=False)], ids=lambda n: f"{n.name}{'' if getattr(n, 'exact', True) else '-ns'}")
def test_sharp_is_the_dual_norm_times_the_lmo(norm):
    generator = torch.Generator().manual_seed(7)
    g = torch.randn(6, 4, dtype=torch.float64, generator=generator)
    torch.testing.assert_close(norm.sharp(g), norm.dual_norm(g) * norm.lmo(g), atol=1e-12, rtol=1e-12)
    if getattr(norm, "exact", True):
        # <g, g#> = ||g||_*^2, and g# maximizes <g, d> - ||d||^2 / 2 (random probes do no better)
        torch.testing.assert_close((g * norm.sharp(g)).sum(), norm.dual_norm(g) ** 2)
        best = float((g * norm.sharp(g)).sum() - norm.norm(norm.sharp(g)) ** 2 / 2)
        for _ in range(100):
            d = torch.randn(6, 4, dtype=torch.float64, generator=generator)
            assert float((g * d).sum() - norm.norm(d) ** 2 / 2) <= best + 1e-10


def test_get_norm_by_name_and_refusals():
    assert isinstance(get_norm("spectral"), Spectral) and get_norm(L2()).name == "l2"
    with pytest.raises(ValueError, match="norm must be"):
        get_norm("l1")
