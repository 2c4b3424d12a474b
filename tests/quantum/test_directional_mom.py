"""directional_median_of_means (the min–max relaxation of Lugosi–Mendelson over sampled directions) against a
brute-force grid minimization on a tiny instance, and its exact special cases."""

import numpy as np
import pytest

from neurips26.quantum import directional_median_of_means, median_of_means
from neurips26.quantum.classical import directional_mom_objective


def test_lp_optimum_matches_brute_force_grid():
    rng = np.random.default_rng(3)
    x = rng.standard_t(1.8, size=(60, 2)) + np.array([0.3, -0.2])
    k = 5
    ang = rng.uniform(0, np.pi, 6)
    u = np.stack([np.cos(ang), np.sin(ang)], 1)
    y = directional_median_of_means(x, k, directions=u)
    # the objective, computed here from its definition
    z = x.reshape(k, 12, 2).mean(1)
    m = np.array([np.median(z @ uj) for uj in u])
    obj = lambda pts: np.abs(pts @ u.T - m).max(axis=-1)
    h = 0.005
    g = np.arange(-1.5, 1.5 + h / 2, h)
    pts = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    best = obj(pts).min()
    val = float(obj(y[None])[0])
    assert val == pytest.approx(directional_mom_objective(y, z, u), abs=1e-12)
    # no grid point does better than the LP, and the grid's best is within its resolution of it
    # (the objective is 1-Lipschitz: |<u, y> - <u, y'>| <= |y - y'|)
    assert val <= best + 1e-9
    assert best <= val + h * np.sqrt(2) / 2 + 1e-12


def test_one_dimension_is_median_of_means():
    x = np.random.default_rng(0).standard_t(1.6, size=301)
    assert directional_median_of_means(x, 7)[0] == pytest.approx(float(median_of_means(x, 7)), abs=1e-9)


def test_axes_only_gives_coordinatewise_median_of_means():
    x = np.random.default_rng(1).standard_t(2.2, size=(200, 3))
    y = directional_median_of_means(x, 8, n_directions=0)
    np.testing.assert_allclose(y, median_of_means(x, 8), atol=1e-9)


def test_random_directions_are_seeded():
    x = np.random.default_rng(2).standard_t(1.7, size=(400, 4))
    a = directional_median_of_means(x, 9, n_directions=32, rng=5)
    b = directional_median_of_means(x, 9, n_directions=32, rng=5)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(directions=np.ones((3, 2))), ValueError, "directions"),
    (dict(directions=np.array([[1.0, 0, 0], [0, 0, 0]])), ValueError, "non-zero"),
    (dict(n_directions=-1), ValueError, "n_directions"),
    (dict(n_directions=2.5), TypeError, "n_directions"),
])
def test_bad_input(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        directional_median_of_means(np.ones((20, 3)), 4, **kwargs)
