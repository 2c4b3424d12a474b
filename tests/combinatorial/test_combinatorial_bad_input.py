"""Bad input to the combinatorial field's public entry points: every probe must raise a
ValueError / TypeError whose message names the argument (issue 22, section 5).

Classes of bad input: NaN, inf, empty, wrong shape, wrong dtype / type, out-of-range
settings, infeasible problem settings and infeasible labels. The probes are listed as data
(one ``(name, call, exception, pattern)`` row each) so that their count is the module's
count. NumPy integers are accepted wherever Python ints are (tests at the end)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.combinatorial import (RLNS, BruteForceLocalSolver, Entropic, FenchelYoungLoss, GeneralizedAssignment,
                                     Greedy, KSubset, MILPLocalSolver, Perturbed, RandomBlock, VehicleScheduling,
                                     empirical_distribution, exact_fenchel_young_ksubset, gibbs, is_irreducible,
                                     ksubset_log_partition, ksubset_marginals, solve_binary_milp, tv_distance)

NAN, INF = float("nan"), float("inf")
BAD = (ValueError, TypeError)
W = np.array([[3.0, 4.0, 2.0], [4.0, 2.0, 3.0]])  # 2 agents, 3 jobs
CAP = [6.0, 6.0]
ARCS = [(-1, 0), (-1, 1), (-1, 2), (0, -2), (1, -2), (2, -2), (0, 1), (1, 2), (0, 2)]


def _ks():
    return KSubset(5, 2)


def _ks_rlns():
    return RLNS(_ks(), RandomBlock(2), Entropic(1.0))


def _gap():
    return GeneralizedAssignment(W, CAP)


def _vsp():
    return VehicleScheduling(3, ARCS)


def _y_ks(rows=((1, 1, 0, 0, 0),)):
    return np.array(rows, dtype=np.int8)


def _fy(**kw):
    return FenchelYoungLoss(_ks_rlns(), **kw)


def _fy_call(y, theta=None, problem=None, sampler=None):
    problem = problem or _ks()
    sampler = sampler or RLNS(problem, RandomBlock(2), Entropic(1.0))
    theta = torch.zeros((len(y), problem.n_vars), dtype=torch.float64) if theta is None else theta
    return FenchelYoungLoss(sampler, steps=1, chains=2)(theta, y)


def _gap_y(assign):
    return _gap().one_hot(np.array([assign]))


_vsp_one_each = _vsp().random_feasible(np.random.default_rng(0), 1)

PROBES = [
    # --- KSubset ---
    ("ksubset-k-zero", lambda: KSubset(5, 0), ValueError, "k must"),
    ("ksubset-k-equals-n", lambda: KSubset(5, 5), ValueError, "k must"),
    ("ksubset-k-negative", lambda: KSubset(5, -1), ValueError, "k must"),
    ("ksubset-k-float", lambda: KSubset(5, 2.0), TypeError, "k must be an integer"),
    ("ksubset-n-float", lambda: KSubset(5.5, 2), TypeError, "n must be an integer"),
    ("ksubset-n-nan", lambda: KSubset(NAN, 2), TypeError, "n must be an integer"),
    ("ksubset-n-one", lambda: KSubset(1, 1), ValueError, "n must"),
    ("ksubset-k-bool", lambda: KSubset(5, True), TypeError, "k must be an integer"),
    # --- GeneralizedAssignment ---
    ("gap-weights-nan", lambda: GeneralizedAssignment([[NAN, 1.0]], [3.0]), ValueError, "weights.*NaN"),
    ("gap-weights-inf", lambda: GeneralizedAssignment([[INF, 1.0]], [3.0]), ValueError, "weights.*inf"),
    ("gap-weights-negative", lambda: GeneralizedAssignment([[-1.0, 1.0]], [3.0]), ValueError, "weights.*>= 0"),
    ("gap-weights-1d", lambda: GeneralizedAssignment([1.0, 2.0], [3.0]), ValueError, "weights must"),
    ("gap-weights-no-agents", lambda: GeneralizedAssignment(np.zeros((0, 3)), np.zeros(0)), ValueError,
     "weights.*agent"),
    ("gap-weights-no-jobs", lambda: GeneralizedAssignment(np.zeros((2, 0)), CAP), ValueError, "weights.*job"),
    ("gap-weights-strings", lambda: GeneralizedAssignment([["a", "b"]], [3.0]), BAD, "weights"),
    ("gap-capacities-nan", lambda: GeneralizedAssignment(W, [NAN, 6.0]), ValueError, "capacities.*NaN"),
    ("gap-capacities-inf", lambda: GeneralizedAssignment(W, [INF, 6.0]), ValueError, "capacities.*inf"),
    ("gap-capacities-negative", lambda: GeneralizedAssignment(W, [-1.0, 6.0]), ValueError, "capacities.*>= 0"),
    ("gap-capacities-shape", lambda: GeneralizedAssignment(W, [6.0, 6.0, 6.0]), ValueError, "capacities must"),
    ("gap-job-fits-no-agent", lambda: GeneralizedAssignment([[5.0, 1.0], [6.0, 1.0]], [4.0, 4.0]), ValueError,
     "job 0 .*fits no agent"),
    ("gap-total-capacity-short", lambda: GeneralizedAssignment([[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]], [4.0, 4.0]),
     ValueError, "infeasible.*capacit"),
    # --- VehicleScheduling ---
    ("vsp-n-tasks-zero", lambda: VehicleScheduling(0, [(-1, 0)]), ValueError, "n_tasks must"),
    ("vsp-n-tasks-float", lambda: VehicleScheduling(2.5, ARCS), TypeError, "n_tasks must be an integer"),
    ("vsp-arcs-1d", lambda: VehicleScheduling(3, [0, 1, 2]), ValueError, "arcs must"),
    ("vsp-arcs-nan", lambda: VehicleScheduling(3, np.array(ARCS + [(0, NAN)], dtype=float)), ValueError,
     "arcs.*integer"),
    ("vsp-arcs-fractional", lambda: VehicleScheduling(3, np.array(ARCS + [(0, 1.5)])), ValueError,
     "arcs.*integer"),
    ("vsp-arcs-strings", lambda: VehicleScheduling(3, [("a", "b")]), BAD, "arcs"),
    ("vsp-arcs-empty", lambda: VehicleScheduling(1, np.zeros((0, 2), dtype=int)), ValueError,
     "task 0 needs its source arc"),
    ("vsp-arc-tail-out-of-range", lambda: VehicleScheduling(3, ARCS + [(7, 1)]), ValueError, "arc .*tail"),
    ("vsp-arc-self-loop", lambda: VehicleScheduling(3, ARCS + [(1, 1)]), ValueError, "arc \\(1, 1\\).*itself"),
    ("vsp-arc-depot-to-depot", lambda: VehicleScheduling(3, ARCS + [(-1, -2)]), ValueError,
     "arc \\(-1, -2\\)"),
    ("vsp-arcs-cycle", lambda: VehicleScheduling(3, ARCS + [(2, 0)]), ValueError, "arcs.*cycle"),
    # --- components ---
    ("randomblock-size-zero", lambda: RandomBlock(0), ValueError, "size"),
    ("randomblock-size-negative", lambda: RandomBlock(-2), ValueError, "size"),
    ("randomblock-size-float", lambda: RandomBlock(1.5), TypeError, "size must be an integer"),
    ("randomblock-size-nan", lambda: RandomBlock(NAN), TypeError, "size must be an integer"),
    ("randomblock-size-string", lambda: RandomBlock("2"), TypeError, "size must be an integer"),
    ("randomblock-too-large", lambda: RLNS(_ks(), RandomBlock(6)), ValueError, "neighbourhood size 6"),
    ("entropic-temperature-zero", lambda: Entropic(0.0), ValueError, "temperature"),
    ("entropic-temperature-nan", lambda: Entropic(NAN), ValueError, "temperature"),
    ("entropic-temperature-inf", lambda: Entropic(INF), ValueError, "temperature"),
    ("entropic-temperature-string", lambda: Entropic("1"), TypeError, "temperature"),
    ("perturbed-scale-negative", lambda: Perturbed(-1.0), ValueError, "scale"),
    ("perturbed-scale-nan", lambda: Perturbed(NAN), ValueError, "scale"),
    ("perturbed-scale-inf", lambda: Perturbed(INF), ValueError, "scale"),
    ("perturbed-noise-unknown", lambda: Perturbed(1.0, "uniform"), ValueError, "noise"),
    ("bruteforce-max-candidates-zero", lambda: BruteForceLocalSolver(0), ValueError, "max_candidates"),
    ("bruteforce-max-candidates-float", lambda: BruteForceLocalSolver(2.5), TypeError, "max_candidates"),
    ("milp-time-limit-negative", lambda: MILPLocalSolver(-1.0), ValueError, "time_limit"),
    ("milp-time-limit-nan", lambda: MILPLocalSolver(NAN), ValueError, "time_limit"),
    ("rlns-problem-not-a-problem", lambda: RLNS(object()), TypeError, "problem"),
    # --- RLNS.run / step ---
    ("run-steps-negative", lambda: _ks_rlns().run(_y_ks(), np.zeros(5), -1), ValueError, "steps must"),
    ("run-steps-float", lambda: _ks_rlns().run(_y_ks(), np.zeros(5), 2.5), TypeError, "steps must be an integer"),
    ("run-steps-nan", lambda: _ks_rlns().run(_y_ks(), np.zeros(5), NAN), TypeError, "steps must be an integer"),
    ("run-steps-string", lambda: _ks_rlns().run(_y_ks(), np.zeros(5), "3"), TypeError, "steps must be an integer"),
    ("run-every-negative", lambda: _ks_rlns().run(_y_ks(), np.zeros(5), 3, every=-1), ValueError, "every must"),
    ("run-every-float", lambda: _ks_rlns().run(_y_ks(), np.zeros(5), 3, every=1.5), TypeError, "every must"),
    ("run-seed-negative", lambda: _ks_rlns().run(_y_ks(), np.zeros(5), 3, seed=-1), ValueError, "seed"),
    ("run-seed-float", lambda: _ks_rlns().run(_y_ks(), np.zeros(5), 3, seed=0.5), TypeError, "seed"),
    ("run-rng-int", lambda: _ks_rlns().run(_y_ks(), np.zeros(5), 3, 5), TypeError, "rng"),
    ("run-theta-nan", lambda: _ks_rlns().run(_y_ks(), np.full(5, NAN), 3), ValueError, "theta"),
    ("run-theta-inf", lambda: _ks_rlns().run(_y_ks(), np.full(5, INF), 3), ValueError, "theta"),
    ("run-theta-shape", lambda: _ks_rlns().run(_y_ks(), np.zeros(4), 3), ValueError, "theta must have shape"),
    ("run-theta-strings", lambda: _ks_rlns().run(_y_ks(), ["a"] * 5, 3), BAD, "theta"),
    ("run-y0-width", lambda: _ks_rlns().run(np.zeros((1, 4), np.int8), np.zeros(5), 3), ValueError, "Y0"),
    ("run-y0-1d", lambda: _ks_rlns().run(np.array([1, 1, 0, 0, 0]), np.zeros(5), 3), ValueError, "Y0"),
    ("run-y0-infeasible", lambda: _ks_rlns().run(_y_ks([(1, 1, 1, 0, 0)]), np.zeros(5), 3), ValueError,
     "Y0 row 0 .*sum.*= 3.*k = 2"),
    ("run-y0-non-binary", lambda: _ks_rlns().run(np.array([[0.5, 1.5, 0, 0, 0]]), np.zeros(5), 3), ValueError,
     "Y0 row 0 .*0 or 1"),
    ("run-y0-nan", lambda: _ks_rlns().run(np.array([[NAN, 1, 1, 0, 0]]), np.zeros(5), 3), ValueError,
     "Y0 row 0 .*0 or 1"),
    ("run-y0-gap-capacity", lambda: RLNS(_gap(), RandomBlock(1)).run(_gap_y([0, 0, 0]), np.zeros(6), 1),
     ValueError, "Y0 row 0 .*agent 0.*capacity"),
    ("run-y0-gap-two-agents", lambda: RLNS(_gap(), RandomBlock(1)).run(np.ones((1, 6), np.int8), np.zeros(6), 1),
     ValueError, "Y0 row 0 .*job 0 .*2 agents"),
    ("step-theta-shape", lambda: _ks_rlns().step(_y_ks(), np.zeros((3, 5)), np.random.default_rng(0)), ValueError,
     "theta must have shape"),
    ("step-rng-missing", lambda: _ks_rlns().step(_y_ks(), np.zeros(5), None), TypeError, "rng"),
    # --- FenchelYoungLoss ---
    ("fy-steps-zero", lambda: _fy(steps=0), ValueError, "steps must"),
    ("fy-steps-negative", lambda: _fy(steps=-3), ValueError, "steps must"),
    ("fy-steps-float", lambda: _fy(steps=1.5), TypeError, "steps must be an integer"),
    ("fy-chains-zero", lambda: _fy(chains=0), ValueError, "chains must"),
    ("fy-seed-negative", lambda: _fy(seed=-1), ValueError, "seed"),
    ("fy-sampler-not-rlns", lambda: FenchelYoungLoss(object()), TypeError, "sampler"),
    ("fy-theta-1d", lambda: _fy()(torch.zeros(5), _y_ks()), ValueError, "theta must be"),
    ("fy-theta-nan", lambda: _fy_call(_y_ks(), torch.full((1, 5), NAN)), ValueError, "theta"),
    ("fy-theta-not-tensor", lambda: _fy()(np.zeros((1, 5)), _y_ks()), TypeError, "theta"),
    ("fy-y-shape", lambda: _fy_call(_y_ks(), torch.zeros((1, 4))), ValueError, "y_true must have"),
    ("fy-y-infeasible-ksubset", lambda: _fy_call(_y_ks([(1, 1, 1, 0, 0)])), ValueError,
     "y_true row 0 is not a feasible .*sum.*= 3.*k = 2"),
    ("fy-y-non-binary", lambda: _fy_call(np.array([[0.5, 1.5, 0, 0, 0]])), ValueError, "y_true row 0 .*0 or 1"),
    ("fy-y-nan", lambda: _fy_call(np.array([[NAN, 1, 1, 0, 0]])), ValueError, "y_true row 0 .*0 or 1"),
    ("fy-y-infeasible-gap-capacity", lambda: _fy_call(_gap_y([0, 0, 0]), problem=_gap()), ValueError,
     "y_true row 0 .*agent 0.*capacity"),
    ("fy-y-infeasible-gap-unassigned", lambda: _fy_call(np.zeros((1, 6)), problem=_gap()), ValueError,
     "y_true row 0 .*job 0 .*0 agents"),
    ("fy-y-infeasible-vsp", lambda: _fy_call(np.zeros((1, len(ARCS))), problem=_vsp(),
                                             sampler=RLNS(_vsp(), RandomBlock(1), Greedy(), MILPLocalSolver())),
     ValueError, "y_true row 0 .*task 0 has 0 predecessor"),
    # --- exact references ---
    ("exact-fy-k-out-of-range", lambda: exact_fenchel_young_ksubset(torch.zeros(1, 5), torch.zeros(1, 5), 6),
     ValueError, "k must"),
    ("exact-fy-k-float", lambda: exact_fenchel_young_ksubset(torch.zeros(1, 5), torch.zeros(1, 5), 2.0),
     TypeError, "k must be an integer"),
    ("exact-fy-y-shape", lambda: exact_fenchel_young_ksubset(torch.zeros(2, 5), torch.tensor([1.0, 1, 0, 0, 0]), 2),
     ValueError, "y_true must have"),
    ("exact-fy-theta-nan", lambda: exact_fenchel_young_ksubset(torch.full((1, 5), NAN),
                                                               torch.tensor([[1.0, 1, 0, 0, 0]]), 2),
     ValueError, "theta"),
    ("exact-fy-y-infeasible", lambda: exact_fenchel_young_ksubset(torch.zeros(1, 5),
                                                                  torch.tensor([[1.0, 1, 1, 0, 0]]), 2),
     ValueError, "y_true row 0 .*sum.*= 3.*k = 2"),
    ("exact-fy-temperature-zero", lambda: exact_fenchel_young_ksubset(torch.zeros(1, 5),
                                                                      torch.tensor([[1.0, 1, 0, 0, 0]]), 2, 0.0),
     ValueError, "temperature"),
    ("log-partition-temperature-nan", lambda: ksubset_log_partition(torch.zeros(5), 2, NAN), ValueError,
     "temperature"),
    ("log-partition-temperature-negative", lambda: ksubset_log_partition(torch.zeros(5), 2, -1.0), ValueError,
     "temperature"),
    ("log-partition-k-float", lambda: ksubset_log_partition(torch.zeros(5), 2.5), TypeError, "k must be an integer"),
    ("log-partition-theta-not-tensor", lambda: ksubset_log_partition(np.zeros(5), 2), TypeError, "theta"),
    ("marginals-theta-nan", lambda: ksubset_marginals([NAN, 0, 0, 0, 0], 2), ValueError, "theta"),
    ("gibbs-temperature-zero", lambda: gibbs(KSubset(4, 2).enumerate(), np.zeros(4), 0.0), ValueError,
     "temperature"),
    ("gibbs-theta-shape", lambda: gibbs(KSubset(4, 2).enumerate(), np.zeros(3)), ValueError, "theta"),
    ("gibbs-theta-nan", lambda: gibbs(KSubset(4, 2).enumerate(), [NAN, 0, 0, 0]), ValueError, "theta"),
    ("gibbs-states-empty", lambda: gibbs(np.zeros((0, 4)), np.zeros(4)), ValueError, "states"),
    ("tv-shape-mismatch", lambda: tv_distance(np.ones(3) / 3, np.ones(1)), ValueError, "p and q"),
    ("tv-nan", lambda: tv_distance(np.array([NAN, 1.0]), np.array([0.5, 0.5])), ValueError, "p and q"),
    ("empirical-samples-empty", lambda: empirical_distribution(np.zeros((0, 4)), KSubset(4, 2).enumerate()),
     ValueError, "samples"),
    ("empirical-width-mismatch", lambda: empirical_distribution(np.zeros((2, 3)), KSubset(4, 2).enumerate()),
     ValueError, "samples"),
    ("irreducible-not-square", lambda: is_irreducible(np.ones((2, 3))), ValueError, "P must be"),
    ("milp-cost-nan", lambda: solve_binary_milp([NAN, 1.0], []), ValueError, "cost"),
    ("milp-time-limit-negative-solve", lambda: solve_binary_milp([1.0, 1.0], [], time_limit=-1.0), ValueError,
     "time_limit"),
    ("milp-constraint-columns", lambda: solve_binary_milp([1.0, 1.0], [(np.ones((1, 3)), 1, 1)]), ValueError,
     "constraint"),
]


@pytest.mark.parametrize("call, exc, pattern", [p[1:] for p in PROBES], ids=[p[0] for p in PROBES])
def test_bad_input_is_named(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_probe_names_are_unique():
    assert len({p[0] for p in PROBES}) == len(PROBES)


# --- hypothesis: spaces of bad settings --------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=-50, max_value=-1))
def test_negative_steps_are_refused(steps):
    with pytest.raises(ValueError, match="steps must"):
        _ks_rlns().run(_y_ks(), np.zeros(5), steps)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=12), st.integers(min_value=-5, max_value=20))
def test_ksubset_accepts_exactly_0_lt_k_lt_n(n, k):
    if 0 < k < n:
        assert KSubset(n, k).n_states() > 0
    else:
        with pytest.raises(ValueError, match="k must"):
            KSubset(n, k)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1), min_size=5, max_size=5))
def test_a_label_is_refused_exactly_when_infeasible(bits):
    y = np.array([bits], dtype=np.int8)
    if sum(bits) == 2:
        _fy_call(y)
    else:
        with pytest.raises(ValueError, match=f"y_true row 0 is not a feasible .*sum.*= {sum(bits)}"):
            _fy_call(y)


@settings(max_examples=40, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda t: not (0 < t < float("inf"))))
def test_temperatures_outside_0_inf_are_refused(t):
    with pytest.raises(ValueError, match="temperature"):
        Entropic(t)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=2), st.sampled_from([NAN, INF, -INF, -1.0]))
def test_non_finite_or_negative_gap_weights_are_refused(i, bad):
    w = W.copy()
    w.flat[i] = bad
    with pytest.raises(ValueError, match="weights"):
        GeneralizedAssignment(w, CAP)


# --- NumPy integers are accepted wherever Python ints are ---------------------------------------

def test_numpy_integers_are_accepted_and_give_the_same_result():
    prob = KSubset(np.int64(5), np.int32(2))
    assert (prob.n, prob.k) == (5, 2) and type(prob.n) is int and type(prob.k) is int
    block = RandomBlock(np.int64(2))
    assert block == RandomBlock(2) and type(block.size) is int
    assert BruteForceLocalSolver(np.int64(64)) == BruteForceLocalSolver(64)
    sampler = RLNS(prob, block, Entropic(1.0))
    theta = np.linspace(-1, 1, 5)
    y0 = _y_ks([(1, 1, 0, 0, 0)] * 3)
    ref = sampler.run(y0, theta, 7, seed=3)
    np.testing.assert_array_equal(sampler.run(y0, theta, np.int64(7), seed=np.int64(3)), ref)
    kept = sampler.run(y0, theta, np.int64(6), every=np.int16(2), seed=3)
    assert len(kept) == 3
    np.testing.assert_array_equal(sampler.run(y0, theta, 0), y0)  # steps = 0: the start, unchanged
    fy_ref = FenchelYoungLoss(sampler, steps=2, chains=4, seed=1)
    fy_np = FenchelYoungLoss(sampler, steps=np.int64(2), chains=np.int32(4), seed=np.int64(1))
    t = torch.tensor(np.tile(theta, (2, 1)))
    y = y0[:2]
    assert float(fy_ref(t, y)) == float(fy_np(t, y))
    torch.testing.assert_close(fy_ref.last_mean, fy_np.last_mean, rtol=0, atol=0)
    vsp = VehicleScheduling(np.int64(3), np.array(ARCS, dtype=np.int32))
    assert vsp.n_tasks == 3 and type(vsp.n_tasks) is int
    th = torch.zeros(1, 5, dtype=torch.float64)
    yt = torch.tensor([[1.0, 1, 0, 0, 0]], dtype=torch.float64)
    assert float(exact_fenchel_young_ksubset(th, yt, np.int64(2))) == float(exact_fenchel_young_ksubset(th, yt, 2))
    assert float(ksubset_log_partition(th, np.int64(2))) == float(ksubset_log_partition(th, 2))


def test_empty_batches_give_empty_results():
    sampler = _ks_rlns()
    out = sampler.run(np.zeros((0, 5), np.int8), np.zeros(5), 3)
    assert out.shape == (0, 5)


def test_feasible_settings_still_pass():
    # boundary cases that are valid: a zero-weight job fits a zero capacity; a single task
    GeneralizedAssignment([[0.0, 1.0], [0.0, 2.0]], [0.0, 2.0])
    VehicleScheduling(1, [(-1, 0), (0, -2)])
    Perturbed(0.0)
    MILPLocalSolver(0.0)
    MILPLocalSolver(None)
