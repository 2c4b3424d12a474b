"""ECE, reliability diagrams, calibrators and the NormSignal features, against a direct
loop, TorchMetrics (dev extra) and the perfectly calibrated case."""

from __future__ import annotations

import numpy as np
import pytest

from neurips26.embeddings import Calibrator, NormSignal, ece, fit_calibrator, reliability_diagram


def _loop_ece(p, y, n_bins):
    # independent: per-sample loop over bins [k/n, (k+1)/n), the last bin closed
    total = 0.0
    for k in range(n_bins):
        lo, hi = k / n_bins, (k + 1) / n_bins
        members = [i for i in range(len(p)) if lo <= p[i] < hi or (k == n_bins - 1 and p[i] == 1.0)]
        if members:
            conf = sum(p[i] for i in members) / len(members)
            acc = sum(y[i] for i in members) / len(members)
            total += len(members) / len(p) * abs(acc - conf)
    return total


@pytest.mark.parametrize("n_bins", [1, 5, 15])
def test_ece_equals_a_direct_loop(n_bins):
    rng = np.random.default_rng(n_bins)
    p = rng.random(400)
    p[:5] = [0.0, 1.0, 0.2, 0.4, 0.6]  # edges
    y = (rng.random(400) < p ** 2).astype(float)
    assert ece(p, y, n_bins) == pytest.approx(_loop_ece(p, y, n_bins), abs=1e-12)


def test_ece_agrees_with_torchmetrics():
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.classification")
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.99, 2000)
    y = (rng.random(2000) < np.clip(p + 0.1, 0, 1)).astype(int)
    ref = tm.BinaryCalibrationError(n_bins=10, norm="l1")(torch.tensor(p), torch.tensor(y))
    assert ece(p, y, 10) == pytest.approx(float(ref), abs=1e-6)


def test_perfect_calibration_ece_vanishes_with_n():
    rng = np.random.default_rng(1)
    vals = []
    for n in (1_000, 100_000):
        p = rng.random(n)
        y = (rng.random(n) < p).astype(float)
        vals.append(ece(p, y, 10))
    assert vals[1] < vals[0] and vals[1] < 0.01
    # and a miscalibrated predictor does not
    p = rng.random(100_000)
    assert ece(p, (rng.random(100_000) < p ** 2).astype(float), 10) > 0.1


def test_reliability_diagram_counts():
    d = reliability_diagram([0.05, 0.15, 0.95, 1.0], [0, 1, 1, 1], n_bins=10)
    assert d.count.tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert np.isnan(d.accuracy[2]) and d.accuracy[9] == 1.0 and d.confidence[9] == pytest.approx(0.975)


def test_calibrators_lower_ece_and_roundtrip(tmp_path):
    rng = np.random.default_rng(2)
    s = rng.normal(size=4000)
    y = (rng.random(4000) < 1 / (1 + np.exp(-3 * s))).astype(int)
    raw = 1 / (1 + np.exp(-s))  # the right ranking, the wrong scale
    before = ece(raw, y)
    for method in ("logistic", "isotonic"):
        cal = fit_calibrator(s[:2000], y[:2000], method=method)
        after = ece(cal.predict(s[2000:]), y[2000:])
        assert after < before / 2
    cal = fit_calibrator(np.c_[s, rng.normal(size=4000)], y)
    path = cal.save(tmp_path / "cal.pkl")
    again = Calibrator.load(path)
    assert np.array_equal(again.predict(np.c_[s, s]), cal.predict(np.c_[s, s]))
    assert (tmp_path / "cal.json").is_file()


def test_norm_signal_features():
    sig = NormSignal()
    X = sig.features([0.5, 0.2], [2.0, 4.0], [1.0, np.e], extra=[0.1, 0.3])
    assert X.shape == (2, len(sig.names(["margin"])))
    np.testing.assert_allclose(X[1], [0.2, 0.3, np.log(4), 1.0, np.log(4) + 1, 0.2 * (np.log(4) + 1)])
    assert NormSignal(query=False, product=False, interaction=False).features([0.5], [2.0], [3.0]).shape == (1, 2)


def test_validation():
    with pytest.raises(ValueError, match="prob"):
        ece([0.5, 1.5], [0, 1])
    with pytest.raises(ValueError, match="correct"):
        ece([0.5, 0.5], [0, 2])
    with pytest.raises(ValueError, match="empty"):
        ece([], [])
    with pytest.raises(ValueError, match="NaN"):
        ece([np.nan], [1])
    with pytest.raises(ValueError, match="n_bins"):
        ece([0.5], [1], n_bins=0)
    with pytest.raises(ValueError, match="both"):
        fit_calibrator([1.0, 2.0], [1, 1])
    with pytest.raises(ValueError, match="one feature"):
        fit_calibrator(np.ones((4, 2)), [0, 1, 0, 1], method="isotonic")
    with pytest.raises(ValueError, match="method"):
        fit_calibrator([1.0, 2.0], [0, 1], method="platt")
    with pytest.raises(ValueError, match="positive"):
        NormSignal().features([0.5], [0.0], [1.0])
    with pytest.raises(ValueError, match="query_norm"):
        NormSignal().features([0.5, 0.1], [1.0], [1.0, 1.0])
