import pytest
import torch

from neurips26.linalg import MUON_COEFFICIENTS, NEWTON_SCHULZ_CUBIC, msign, polar, truncated_svd


def _with_spectrum(m, n, s, seed=0, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(m, len(s), generator=generator, dtype=dtype))
    v, _ = torch.linalg.qr(torch.randn(n, len(s), generator=generator, dtype=dtype))
    return u @ torch.diag(torch.as_tensor(s, dtype=dtype)) @ v.T


@pytest.mark.parametrize("shape", [(40, 40), (60, 25), (25, 60)])
def test_polar_is_exact_polar_factor(shape):
    x = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    q = polar(x)
    r = min(shape)
    gram = q.T @ q if shape[0] >= shape[1] else q @ q.T
    torch.testing.assert_close(gram, torch.eye(r, dtype=torch.float64), atol=1e-12, rtol=0)
    # x = Q H with H = Q^T x symmetric positive semidefinite (the polar decomposition).
    h = q.T @ x if shape[0] >= shape[1] else x @ q.T
    torch.testing.assert_close(h, h.T, atol=1e-10, rtol=0)
    assert torch.linalg.eigvalsh(h).min() > -1e-10


def test_polar_rank_deficient_and_zero():
    x = _with_spectrum(30, 20, [3.0, 2.0, 1.0])
    q = polar(x)
    s = torch.linalg.svdvals(q)
    torch.testing.assert_close(s[:3], torch.ones(3, dtype=torch.float64), atol=1e-12, rtol=0)
    assert s[3:].abs().max() < 1e-12
    z = polar(torch.zeros(5, 7))
    assert torch.equal(z, torch.zeros(5, 7))


@pytest.mark.parametrize("shape", [(64, 64), (96, 32), (32, 96), (3, 48, 24)])
def test_msign_muon_is_close_to_polar_but_not_exact(shape):
    # Singular values spread over two decades relative to the largest: the regime Muon is
    # tuned for. Its quintic does not converge to 1 but lands in a band around it.
    m, n = shape[-2:]
    r = min(m, n)
    spectrum = torch.logspace(0, -2, r, dtype=torch.float64)
    mats = [_with_spectrum(m, n, spectrum, seed=i) for i in range(shape[0] if len(shape) == 3 else 1)]
    x = torch.stack(mats) if len(shape) == 3 else mats[0]
    y = msign(x, steps=5)
    assert y.shape == x.shape
    s = torch.linalg.svdvals(y)
    assert s.min() > 0.6 and s.max() < 1.25, (s.min(), s.max())
    err = torch.linalg.matrix_norm(y - polar(x), ord=2)
    # Spectral error equals max |p(s) - 1| over singular values: bounded by the band, not ~0.
    assert err.max() < 0.4
    assert err.max() > 1e-3  # Muon's coefficients are deliberately inexact.


def test_msign_cubic_converges_to_polar():
    x = _with_spectrum(50, 30, torch.linspace(1.0, 0.2, 30))
    y = msign(x, steps=40, coefficients=NEWTON_SCHULZ_CUBIC)
    torch.testing.assert_close(y, polar(x), atol=1e-9, rtol=0)


def test_msign_zero_and_rank_deficient_no_nan():
    assert torch.equal(msign(torch.zeros(8, 5)), torch.zeros(8, 5))
    x = _with_spectrum(20, 12, [1.0, 0.5], dtype=torch.float32)
    y = msign(x)
    assert torch.isfinite(y).all()
    s = torch.linalg.svdvals(y.double())
    assert s[2:].max() < 1e-4  # null directions stay null


def test_msign_validation():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        msign(torch.ones(3))
    with pytest.raises(TypeError, match="floating-point"):
        msign(torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="eps_mode"):
        msign(torch.ones(3, 3), eps_mode="max")
    with pytest.raises(TypeError, match="dtype"):
        msign(torch.ones(3, 3), dtype=torch.int32)


@pytest.mark.parametrize("shape", [(48, 20), (20, 48), (16, 16)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("steps", [1, 5])
def test_msign_muon_form_is_torch_optim_muons_newton_schulz_bit_for_bit(shape, dtype, steps):
    from torch.optim._muon import _zeropower_via_newtonschulz

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64).to(dtype)
    ours = msign(x, steps, MUON_COEFFICIENTS, 1e-7, dtype=torch.bfloat16, eps_mode="clamp", fused=True)
    # torch normalizes its bfloat16 copy in place: give it a copy of x
    ref = _zeropower_via_newtonschulz(x.clone(), MUON_COEFFICIENTS, steps, 1e-7)
    assert ours.dtype == x.dtype
    assert torch.equal(ours, ref.to(dtype))
    # the plain form rounds differently, but computes the same map
    plain = msign(x.to(torch.bfloat16), steps).to(dtype)
    torch.testing.assert_close(plain.double(), ours.double(), atol=0.05, rtol=0)


def test_msign_fused_batches_agree_with_one_matrix_at_a_time():
    x = torch.randn(2, 3, 12, 7, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    batched = msign(x, fused=True, eps_mode="clamp")
    for i in range(2):
        for j in range(3):
            torch.testing.assert_close(batched[i, j], msign(x[i, j], fused=True, eps_mode="clamp"), atol=1e-12, rtol=0)


@pytest.mark.parametrize("method", ["full", "randomized"])
def test_truncated_svd_matches_full_svd(method):
    # A decaying spectrum, where the randomized method is accurate.
    x = _with_spectrum(300, 200, torch.logspace(0, -6, 200))
    u, s, vh = truncated_svd(x, 10, method=method)
    ref = torch.linalg.svdvals(x)[:10]
    # Exact for the full SVD; randomized (4 power iterations) is close, not exact.
    rtol = 1e-10 if method == "full" else 1e-4
    torch.testing.assert_close(s, ref, atol=0, rtol=rtol)
    torch.testing.assert_close(u.T @ u, torch.eye(10, dtype=torch.float64), atol=1e-10, rtol=0)
    best = torch.linalg.matrix_norm(x - (u * s) @ vh, ord=2)
    torch.testing.assert_close(best, torch.linalg.svdvals(x)[10], atol=0, rtol=rtol)  # Eckart–Young


def test_truncated_svd_batched_and_validation():
    x = torch.randn(4, 30, 20, dtype=torch.float64)
    u, s, vh = truncated_svd(x, 5)
    assert u.shape == (4, 30, 5) and s.shape == (4, 5) and vh.shape == (4, 5, 20)
    torch.testing.assert_close(s, torch.linalg.svdvals(x)[:, :5])
    with pytest.raises(ValueError, match="k must be"):
        truncated_svd(x, 21)
    with pytest.raises(ValueError, match="method"):
        truncated_svd(x, 2, method="lanczos")
