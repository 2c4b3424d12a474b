"""The paretom3 reproduction end to end at a tiny size (the --quick run takes a few minutes)."""

import math

import numpy as np
import pytest
from scipy import stats

from neurips26 import reproduce
from neurips26.reproduce import paretom3 as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(seeds=2, rays_b=3, rays_digits=2, budget_a=400, budget_b=120, budget_digits=40, n_train=200,
            n_test=100, cost_steps=2, problems=["zdt1", "fonseca-fleming"], nsga_pop=12, nsga_gen=5,
            a_methods=("ParetoM3", "PNG", "LS"), rays_reg=2, budget_reg=40, reg_methods=("ParetoM3", "EPO", "LS"),
            gammas=(10.0, 100.0), gamma_seeds=1,
            math=dict(config="tiny", rays=2, budget=4, n_train=16, n_test=8, batch=2, merit_steps=1))


def _verdict(lo, hi, margin=0.0):
    return "holds" if lo > margin else "does not hold" if hi < margin else "inconclusive"


def test_paretom3_contract(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    exp = reproduce.get("paretom3")
    a = run_experiment(exp, tmp_path / "a", seed=1, quick=True)
    m = a["metrics"]
    assert m["seeds"] == [1, 2]
    assert set(m["convex"]) == {"ParetoM3", "PNG", "LS"}  # the size's methods on (a)
    assert set(exp_mod.SIZES[False]["a_methods"]) == set(exp_mod.A_METHODS)
    for row in m["convex"].values():
        assert len(row["dist"]["seeds"]) == 2 and row["lr"] in exp_mod.LR_GRID
        assert row["dist"]["mean"] == pytest.approx(np.mean(row["dist"]["seeds"]))
    for p in TINY["problems"]:
        for meth in exp_mod.B_METHODS + ("NSGA-II",):
            row = m["fronts"][p][meth]
            assert len(row["points"]) == 2 and all(len(pts) == TINY["rays_b"] for pts in row["points"])
            assert len(row["dist_instances"]) == 2 * TINY["rays_b"]
            assert all(0.0 <= h <= 1.21 for h in row["hv"]["seeds"])
        assert 0.0 < m["fronts"][p]["front_hv"] <= 1.21
    for meth in exp_mod.DIGIT_METHODS:
        assert len(m["digits"][meth]) == TINY["rays_digits"]
        for row in m["digits"][meth]:
            assert all(0.0 <= acc <= 1.0 for acc in row["acc"]) and len(row["acc_seeds"]) == 2
            assert all(-1.0 <= al <= 1.0 for al in row["alignment"]["seeds"])
    assert set(m["cost_s_per_iteration"]) == {"2", "5", "10"}
    claims = a["claims"]
    assert len(claims) == 7
    for c in claims:  # every claim decided with its uncertainty
        assert c["verdict"] in ("holds", "does not hold", "inconclusive", "not tested")
        assert math.isfinite(c["ours"]) and math.isfinite(c["baseline"])
        lo, hi = c["ci"]
        assert lo <= c["diff"] <= hi and c["verdict"] == _verdict(lo, hi, c["margin"])
    # the thresholds, decided from the per-seed values over seeds (one-sample t)
    pm = m["convex"]["ParetoM3"]
    for c, values, threshold in ((claims[0], pm["dist"]["seeds"], 1e-2), (claims[2], pm["merit"]["seeds"], 1e-3),
                                 (claims[-1], m["cost_ratio_m10_over_m2"]["ParetoM3"]["seeds"], 1.5)):
        assert c["method"] == "one-sample t" and c["ours_seeds"] == values and c["baseline"] == threshold
        d = [threshold - v for v in values]
        if len(set(d)) > 1:
            ci = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
            assert c["ci"] == [pytest.approx(ci.low), pytest.approx(ci.high)]
    # (b) paired over problem x seed x ray instances against the other method with the smallest mean distance
    b = claims[1]
    inst = {meth: [d for p in TINY["problems"] for d in m["fronts"][p][meth]["dist_instances"]]
            for meth in exp_mod.B_METHODS + ("NSGA-II",)}
    best = min((k for k in inst if k != "ParetoM3"), key=lambda k: np.mean(inst[k]))
    assert f"best other: {best};" in b["claim"] and b["n"] == 2 * 2 * TINY["rays_b"]
    assert b["ours_seeds"] == inst["ParetoM3"] and b["baseline_seeds"] == inst[best]
    # digits: paired over ray x seed (x task for accuracy), non-inferiority within one point for accuracy
    assert claims[3]["n"] == claims[5]["n"] == 2 * TINY["rays_digits"]
    assert claims[4]["n"] == 2 * 2 * TINY["rays_digits"] and claims[4]["margin"] == -0.01
    reg = m["regression"]
    for p in exp_mod.REG_TASKS:
        assert len(reg[p]["front_hv"]) == 2 and len(reg[p]["preferred"]) == 2
        for meth in TINY["reg_methods"]:
            row = reg[p][meth]
            assert len(row["dist_instances"]) == 2 * TINY["rays_reg"] and row["lr"] in exp_mod.LR_GRID
            assert len(row["points"]) == 2 and all(len(pts) == TINY["rays_reg"] for pts in row["points"])
            assert all(len(q) == (2 if p == "diabetes" else 3) for pts in row["points"] for q in pts)
            assert row["dist"]["seeds"] == pytest.approx([np.mean(row["dist_instances"][:2]),
                                                          np.mean(row["dist_instances"][2:])])
            assert all(0.0 <= h <= 1.0 + 1e-9 for h in row["hv_relative"]["seeds"])
            assert all(u >= 0.0 for u in row["merit"]["seeds"]) and all(-1 <= c <= 1 for c in row["alignment"]["seeds"])
        assert ("test_worst_group" in reg[p]["ParetoM3"]) == (p == "diabetes")
    gs = m["gamma_sweep"]
    assert gs["seeds"] == [1] and set(gs["rows"]) == {"10", "100", "schedule"}
    # the default schedule's row is (a)'s ParetoM3 run on the same seed
    assert gs["rows"]["schedule"]["dist"]["seeds"] == [m["convex"]["ParetoM3"]["dist"]["seeds"][0]]
    # the math task (the full run's; here at a tiny size): per method, one row per ray with two accuracies
    assert set(m["math"]) == set(exp_mod.MATH_METHODS)
    for rows in m["math"].values():
        assert len(rows) == 2 and all(len(r["acc"]) == 2 and len(r["acc_seeds"]) == 2 for r in rows)
        assert all(u >= 0.0 for r in rows for u in r["merit"]["seeds"])
    out = tmp_path / "a" / "paretom3"
    for png in ("fronts.png", "digits_losses.png", "regression_fronts.png", "gamma_sensitivity.png"):
        assert (out / png).exists()


def test_choose_lr_takes_the_smallest_tuning_distance_per_key():
    tasks = [exp_mod.ConvexTask(meth, 0, 10, lr) for meth in ("A", "B") for lr in exp_mod.LR_GRID]
    dists = [0.5, 0.1, 0.1, 0.2, 0.3, 0.05]
    lr = exp_mod._choose_lr(tasks, [{"dist": d} for d in dists], lambda t: t.method)
    assert lr == {"A": exp_mod.LR_GRID[1], "B": exp_mod.LR_GRID[2]}


def test_preferred_point_lies_on_the_ray_and_the_front():
    front = exp_mod._front("zdt1")
    for r in exp_mod._rays(5):
        q = exp_mod._preferred(front, r)
        # on the ray: r_1 F_1 = r_2 F_2
        assert abs(r[0] * q[0] - r[1] * q[1]) < 1e-3
        # on ZDT1's front F_2 = 1 - sqrt(F_1)
        assert abs(q[1] - (1 - np.sqrt(q[0]))) < 1e-3


# ----------------------------------------------------------------------------- regression tasks

def _whitened_params(A, y_std_pred):
    """The parameter vector of the (whitened) design A whose predictions are y_std_pred (an affine function of
    the raw features lies in A's column space: exact least squares)."""
    x, *_ = np.linalg.lstsq(A, y_std_pred, rcond=None)
    assert np.allclose(A @ x, y_std_pred, atol=1e-9)
    return x


def test_diabetes_objectives_are_the_two_sex_groups_squared_errors():
    """F(x) equals, for an affine predictor of the raw features, the mean squared error (standardized target) of
    the training rows of each sex group, computed directly from scikit-learn's raw data and the seed's split."""
    import torch
    from sklearn.datasets import load_diabetes

    seed = 3
    prob = exp_mod._reg_problem("diabetes", seed, 3)
    d = load_diabetes(scaled=False)
    X, y = d.data, d.target
    perm = np.random.default_rng(seed).permutation(len(y))
    tr = perm[: int(0.8 * len(y))]
    ym, ys = y[tr].mean(), y[tr].std()
    rng = np.random.default_rng(0)
    beta, b = rng.normal(size=10) * 0.05, rng.normal() * 10 + ym
    pred = X @ beta + b                                  # an arbitrary affine predictor of the raw features
    A = np.concatenate(prob["data"]["A"])                # the training rows, group 1 then group 2
    sex = X[tr, 1]
    order = np.concatenate([np.flatnonzero(sex == 1.0), np.flatnonzero(sex == 2.0)])
    x = _whitened_params(A, (pred[tr][order] - ym) / ys)
    direct = [np.mean(((pred[tr][sex == g] - y[tr][sex == g]) / ys) ** 2) for g in (1.0, 2.0)]
    F = prob["F"](torch.from_numpy(x)).numpy()
    assert F == pytest.approx(direct, rel=1e-10)
    assert len(prob["data"]["y"][0]) == int((sex == 1.0).sum()) and len(prob["data"]["y"][1]) == int((sex == 2.0).sum())
    # the scalarized optimum x*(lam) is scikit-learn's weighted least squares on the raw features
    from sklearn.linear_model import LinearRegression

    lam = (0.3, 0.7)
    w = np.where(sex == 1.0, lam[0] / (sex == 1.0).sum(), lam[1] / (sex == 2.0).sum())
    lr = LinearRegression().fit(X[tr], (y[tr] - ym) / ys, sample_weight=w)
    ref = [np.mean((lr.predict(X[tr][sex == g]) - (y[tr][sex == g] - ym) / ys) ** 2) for g in (1.0, 2.0)]
    ours = exp_mod._ls_losses(prob["data"]["A"], prob["data"]["y"],
                              exp_mod._ls_scalarized(prob["data"]["A"], prob["data"]["y"], lam))
    assert ours == pytest.approx(ref, rel=1e-8)


def test_linnerud_objectives_share_one_linear_score():
    import torch
    from sklearn.datasets import load_linnerud

    prob = exp_mod._reg_problem("linnerud", 0, 3)
    d = load_linnerud()
    Ys = (d.target - d.target.mean(0)) / d.target.std(0)
    beta = np.array([0.05, -0.01, 0.003])
    score = d.data @ beta
    score -= score.mean()                                # the centered features carry no intercept
    x = _whitened_params(prob["data"]["A"][0], score)
    direct = ((score[:, None] - Ys) ** 2).mean(0)
    assert prob["F"](torch.from_numpy(x)).numpy() == pytest.approx(direct, rel=1e-10)


@pytest.mark.parametrize("name", ["diabetes", "linnerud"])
def test_preferred_point_is_the_chebyshev_optimum_of_its_ray(name):
    """Independent reference (cvxpy): min_x max_i r_i F_i(x) equals r_i F_i at the preferred point for every i,
    i.e. the preferred point lies on the ray and no point of the ray is attainable closer to the origin."""
    import cvxpy as cp

    prob = exp_mod._reg_problem(name, 1, 3)
    A, y = prob["data"]["A"], prob["data"]["y"]
    for r, q in zip(prob["rays"], prob["preferred"]):
        assert np.ptp(r * q) < 1e-12 and r.sum() == pytest.approx(1.0)
        x = cp.Variable(prob["p"])
        t = cp.Variable()
        cons = [r[k] * cp.sum_squares(Ak @ x - yk) / len(Ak) <= t for k, (Ak, yk) in enumerate(zip(A, y))]
        cp.Problem(cp.Minimize(t), cons).solve()
        assert t.value == pytest.approx(float(r[0] * q[0]), rel=1e-5)


def test_regression_front_is_nondominated_and_contains_the_preferred_points():
    for name in exp_mod.REG_TASKS:
        data = exp_mod._regression_data(name, 0)
        front = exp_mod._reg_front(data, 60 if len(data["A"]) == 2 else 12)
        dominated = (front[:, None] <= front[None] + 1e-12).all(-1) & (front[:, None] < front[None] - 1e-9).any(-1)
        assert not dominated.any()
        pref = exp_mod._reg_problem(name, 0, 3)["preferred"]
        # each preferred point is weakly nondominated by the front: no front point is better in every loss
        assert not (front[:, None] < pref[None] - 1e-9).all(-1).any()


def test_linear_scalarization_run_reaches_the_numpy_weighted_least_squares_point():
    """Pure-numpy reference: linear scalarization with weights r converges to the normal-equation solution of
    sum_i r_i F_i, whose losses run_regression must report."""
    t = exp_mod.RegressionTask("diabetes", "LS", 0, 1, 3, 1500, 0.3)
    out = exp_mod.run_regression(t)
    prob = exp_mod._reg_problem("diabetes", 0, 3)
    A, y, r = prob["data"]["A"], prob["data"]["y"], prob["rays"][1]
    ref = exp_mod._ls_losses(A, y, exp_mod._ls_scalarized(A, y, r))
    assert out["losses"] == pytest.approx(ref, abs=1e-8)
    assert out["dist"] == pytest.approx(float(np.linalg.norm(ref - prob["preferred"][1])), abs=1e-7)
    inv = 1 / r
    assert out["alignment"] == pytest.approx(float(ref @ inv / np.linalg.norm(ref) / np.linalg.norm(inv)), abs=1e-8)
    assert len(out["test_losses"]) == 2 and out["merit"] >= 0.0 and not out["diverged"]


def test_gamma_run_holds_gamma_fixed():
    """A fixed-gamma task equals ParetoM3 driven directly with that constant gamma and step lr / (gamma alpha)."""
    import torch
    from neurips26.optim.paretom3 import ParameterVector, ParetoM3, TargetPoint

    gamma, budget = 100.0, 400
    a, z, xstar = exp_mod._convex_instance(0)
    mod = ParameterVector(torch.zeros(5, dtype=torch.float64))
    opt = ParetoM3(mod, lambda fwd, b: ((fwd()[None] - a) ** 2).sum(1), TargetPoint(z), gamma=gamma,
                   alpha=exp_mod.ALPHA, lr=1.0 / gamma, lr_y=exp_mod.LR_Y, lr_lambda=exp_mod.LR_LAMBDA)
    while opt.backward_passes < budget:
        opt.step()
    out = exp_mod.run_gamma(exp_mod.GammaTask(0, gamma, budget, 1.0))
    assert out["dist"] == pytest.approx(float((mod.x.detach() - xstar).norm()), rel=1e-10)
    assert out["merit"] >= 0.0 and not out["diverged"]
