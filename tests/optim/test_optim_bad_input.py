"""Bad input to the optim field's public entry points (issue 22, section 5), and to the
shared geometry (neurips26.geometry) and numerics (neurips26.linalg) they build on.

Every probe in ``PROBES`` feeds one entry point one class of bad input (a NaN or Inf
gradient, NaN/Inf/negative/wrongly typed settings given at construction, in a param group,
through ``add_param_group`` or written into ``param_groups`` after construction as a
scheduler would, integer and complex parameters, wrong numbers of betas, NaN matrices to the
norms' oracles) and asserts a ValueError / TypeError / FloatingPointError whose message
names the argument, the parameter or the tensor. The tests after the table pin what is
*not* an error: ``skip_nonfinite=True`` skips a non-finite step leaving parameters and state
exactly as they were, a negative lr written into a param group is accepted as torch.optim
accepts it, ``maximize=True`` is torch.optim's, empty parameters step, numpy numbers are
accepted wherever Python numbers are.
"""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurips26.geometry import L2, Linf, Spectral, nsgd_step
from neurips26.linalg import msign, polar, truncated_svd
from neurips26.optim import (NSGD, QuadrupleOptimizer, quadruple_adam, quadruple_adamw, quadruple_aligned,
                             quadruple_lion, quadruple_muon, quadruple_sgd, quadruple_shampoo, quadruple_spectral,
                             quadruple_tracking)
from neurips26.optim.quadruple import Euclidean, Gradient, NoMemory

INF, NAN = float("inf"), float("nan")

# Every optimizer of the package, with settings that step matrices (Muon's domain).
OPTIMIZERS = {
    "nsgd-l2": lambda ps, **kw: NSGD(ps, **{"lr": 0.1, "norm": "l2", **kw}),
    "nsgd-linf": lambda ps, **kw: NSGD(ps, **{"lr": 0.1, "norm": "linf", **kw}),
    "nsgd-spectral": lambda ps, **kw: NSGD(ps, **{"lr": 0.1, "norm": "spectral", **kw}),
    "sgd": lambda ps, **kw: quadruple_sgd(ps, **{"lr": 0.1, "momentum": 0.9, **kw}),
    "adam": lambda ps, **kw: quadruple_adam(ps, **{"lr": 1e-2, **kw}),
    "adamw": lambda ps, **kw: quadruple_adamw(ps, **{"lr": 1e-2, **kw}),
    "lion": lambda ps, **kw: quadruple_lion(ps, **{"lr": 1e-3, **kw}),
    "shampoo": lambda ps, **kw: quadruple_shampoo(ps, **{"lr": 0.05, **kw}),
    "muon": lambda ps, **kw: quadruple_muon(ps, **{"lr": 0.02, **kw}),
    "spectral": lambda ps, **kw: quadruple_spectral(ps, **{"lr": 0.02, **kw}),
    "tracking": lambda ps, **kw: quadruple_tracking(ps, **{"lr": 1e-2, **kw}),
    "aligned": lambda ps, **kw: quadruple_aligned(ps, **{"lr": 0.05, **kw}),
}
NAMES = sorted(OPTIMIZERS)
SHAPES = ((3, 4), (4, 5))


def params(seed=0, shapes=SHAPES, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=generator, dtype=dtype)) for s in shapes]


def set_grads(ps, seed=1, bad=None, where=None):
    """Random gradients; ``bad`` (a float) written into entry (0, 0) of parameter ``where``."""
    generator = torch.Generator().manual_seed(seed)
    for i, p in enumerate(ps):
        p.grad = torch.randn(p.shape, generator=generator, dtype=p.dtype)
        if bad is not None and i == where:
            p.grad[(0,) * p.ndim] = bad


def step_with_bad_gradient(name, bad, two_groups=False):
    ps = params()
    if two_groups:
        extra = params(seed=2, shapes=((2, 3),))
        opt = OPTIMIZERS[name]([{"params": ps}, {"params": extra}])
        set_grads(ps)
        set_grads(extra, seed=3, bad=bad, where=0)
    else:
        opt = OPTIMIZERS[name](ps)
        set_grads(ps, bad=bad, where=1)
    opt.step()


def step_after(name, key, value, group=0):
    """Construct, then write ``value`` into param group ``group``'s ``key`` (as a scheduler or
    a user would), then step."""
    ps = params()
    opt = OPTIMIZERS[name]([{"params": ps[:1]}, {"params": ps[1:]}])
    opt.param_groups[group][key] = value
    set_grads(ps)
    opt.step()


def add_group(name, **group):
    ps = params()
    opt = OPTIMIZERS[name](ps[:1])
    opt.add_param_group({"params": group.pop("params", ps[1:]), **group})


def tensors(shapes=SHAPES):
    """Plain tensors (no autograd) for the functional step."""
    return [torch.ones(s, dtype=torch.float64) for s in shapes]


def nan_matrix(shape=(4, 3), value=NAN, dtype=torch.float64):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=dtype)
    x[(0,) * len(shape)] = value
    return x


LR_KEY = {name: "lr" for name in NAMES}


# --- the table ----------------------------------------------------------------------------------
# (id, thunk, exception type, regex the message must match)

def _per_optimizer():
    rows = []
    for n in NAMES:
        make = OPTIMIZERS[n]
        rows += [
            # non-finite gradients met while stepping: FloatingPointError naming the parameter
            (f"{n} NaN gradient", lambda n=n: step_with_bad_gradient(n, NAN), FloatingPointError,
             r"non-finite gradient in parameter 1 of group 0 \(shape \(4, 5\)\)"),
            (f"{n} +Inf gradient", lambda n=n: step_with_bad_gradient(n, INF), FloatingPointError,
             r"non-finite gradient in parameter 1 of group 0 \(shape \(4, 5\)\)"),
            (f"{n} -Inf gradient in group 1", lambda n=n: step_with_bad_gradient(n, -INF, two_groups=True),
             FloatingPointError, r"non-finite gradient in parameter 0 of group 1 \(shape \(2, 3\)\)"),
            # settings at construction
            (f"{n} lr=nan", lambda make=make: make(params(), lr=NAN), ValueError, r"\blr\b"),
            (f"{n} lr=inf", lambda make=make: make(params(), lr=INF), ValueError, r"\blr\b"),
            (f"{n} lr<0", lambda make=make: make(params(), lr=-0.1), ValueError, r"\blr\b"),
            (f"{n} lr=str", lambda make=make: make(params(), lr="0.1"), TypeError, r"\blr\b"),
            (f"{n} lr=None", lambda make=make: make(params(), lr=None), TypeError, r"\blr\b"),
            (f"{n} weight_decay=nan", lambda make=make: make(params(), weight_decay=NAN), ValueError,
             r"weight_decay"),
            (f"{n} weight_decay=inf", lambda make=make: make(params(), weight_decay=INF), ValueError,
             r"weight_decay"),
            (f"{n} weight_decay<0", lambda make=make: make(params(), weight_decay=-0.1), ValueError,
             r"weight_decay"),
            # settings of a param group given at construction
            (f"{n} group lr=nan", lambda make=make: make([{"params": params(), "lr": NAN}]), ValueError,
             r"\blr\b.*param group 0"),
            (f"{n} group lr<0", lambda make=make: make([{"params": params()[:1]}, {"params": params()[1:],
                                                                                   "lr": -1.0}]),
             ValueError, r"\blr\b.*param group 1"),
            (f"{n} group weight_decay=nan", lambda make=make: make([{"params": params(), "weight_decay": NAN}]),
             ValueError, r"weight_decay.*param group 0"),
            # add_param_group
            (f"{n} add_param_group lr=inf", lambda n=n: add_group(n, lr=INF), ValueError, r"\blr\b.*param group 1"),
            (f"{n} add_param_group weight_decay<0", lambda n=n: add_group(n, weight_decay=-1.0), ValueError,
             r"weight_decay.*param group 1"),
            (f"{n} add_param_group int parameter", lambda n=n: add_group(n, params=[torch.zeros(2, 3,
                                                                                                 dtype=torch.long)]),
             TypeError, r"params.*parameter 0 of group 1.*torch\.int64"),
            # values written into param_groups after construction (schedulers, users): checked at step
            (f"{n} step lr=nan", lambda n=n: step_after(n, "lr", NAN), ValueError, r"\blr\b.*param group 0"),
            (f"{n} step lr=inf", lambda n=n: step_after(n, "lr", INF, group=1), ValueError,
             r"\blr\b.*param group 1"),
            (f"{n} step lr=str", lambda n=n: step_after(n, "lr", "0.1"), TypeError, r"\blr\b.*param group 0"),
            (f"{n} step weight_decay<0", lambda n=n: step_after(n, "weight_decay", -0.5), ValueError,
             r"weight_decay.*param group 0"),
            (f"{n} step weight_decay=nan", lambda n=n: step_after(n, "weight_decay", NAN, group=1), ValueError,
             r"weight_decay.*param group 1"),
            # parameters of the wrong dtype
            (f"{n} integer parameter", lambda make=make: make([torch.zeros(2, 3, dtype=torch.int64)]), TypeError,
             r"params.*parameter 0 of group 0.*torch\.int64"),
            (f"{n} complex parameter",
             lambda make=make: make([torch.nn.Parameter(torch.zeros(2, 3, dtype=torch.complex64))]), TypeError,
             r"params.*parameter 0 of group 0.*torch\.complex64"),
            (f"{n} empty parameter list", lambda make=make: make([]), ValueError, r"empty parameter list"),
        ]
    return rows


def _specific():
    p = lambda: params()  # noqa: E731
    return [
        # NSGD
        ("NSGD beta=nan", lambda: NSGD(p(), beta=NAN), ValueError, r"\bbeta\b"),
        ("NSGD beta=1", lambda: NSGD(p(), beta=1.0), ValueError, r"\bbeta\b"),
        ("NSGD beta=str", lambda: NSGD(p(), beta="0.9"), TypeError, r"\bbeta\b"),
        ("NSGD norm=l1", lambda: NSGD(p(), norm="l1"), ValueError, r"norm must be"),
        ("NSGD group beta=-0.1", lambda: NSGD([{"params": p(), "beta": -0.1}]), ValueError,
         r"\bbeta\b.*param group 0"),
        ("NSGD group norm=l1", lambda: NSGD([{"params": p(), "norm": "l1"}]), ValueError, r"norm"),
        ("NSGD step beta=1", lambda: step_after("nsgd-l2", "beta", 1.0), ValueError, r"\bbeta\b.*param group 0"),
        ("NSGD step beta=nan", lambda: step_after("nsgd-linf", "beta", NAN), ValueError, r"\bbeta\b.*param group 0"),
        # SGD
        ("sgd momentum=nan", lambda: quadruple_sgd(p(), momentum=NAN), ValueError, r"momentum"),
        ("sgd momentum<0", lambda: quadruple_sgd(p(), momentum=-0.5), ValueError, r"momentum"),
        ("sgd momentum=1", lambda: quadruple_sgd(p(), momentum=1.0), ValueError, r"momentum"),
        ("sgd momentum=str", lambda: quadruple_sgd(p(), momentum="0.9"), TypeError, r"momentum"),
        ("sgd dampening=nan", lambda: quadruple_sgd(p(), momentum=0.9, dampening=NAN), ValueError, r"dampening"),
        ("sgd dampening=2", lambda: quadruple_sgd(p(), momentum=0.9, dampening=2.0), ValueError, r"dampening"),
        ("sgd nesterov without momentum", lambda: quadruple_sgd(p(), nesterov=True), ValueError, r"Nesterov"),
        # Adam / AdamW
        *[row for make, tag in ((quadruple_adam, "adam"), (quadruple_adamw, "adamw")) for row in [
            (f"{tag} betas of length 1", lambda make=make: make(p(), betas=(0.9,)), ValueError, r"betas"),
            (f"{tag} betas of length 3", lambda make=make: make(p(), betas=(0.9, 0.99, 0.9)), ValueError, r"betas"),
            (f"{tag} betas a float", lambda make=make: make(p(), betas=0.9), TypeError, r"betas"),
            (f"{tag} beta1=1", lambda make=make: make(p(), betas=(1.0, 0.999)), ValueError, r"beta1"),
            (f"{tag} beta1<0", lambda make=make: make(p(), betas=(-0.1, 0.999)), ValueError, r"beta1"),
            (f"{tag} beta2=nan", lambda make=make: make(p(), betas=(0.9, NAN)), ValueError, r"beta2"),
            (f"{tag} beta2=str", lambda make=make: make(p(), betas=(0.9, "0.999")), TypeError, r"beta2"),
            (f"{tag} eps=0", lambda make=make: make(p(), eps=0.0), ValueError, r"\beps\b"),
            (f"{tag} eps<0", lambda make=make: make(p(), eps=-1e-8), ValueError, r"\beps\b"),
            (f"{tag} eps=nan", lambda make=make: make(p(), eps=NAN), ValueError, r"\beps\b"),
            (f"{tag} eps=inf", lambda make=make: make(p(), eps=INF), ValueError, r"\beps\b"),
        ]],
        # Lion
        ("lion betas of length 1", lambda: quadruple_lion(p(), betas=(0.9,)), ValueError, r"betas"),
        ("lion betas of length 3", lambda: quadruple_lion(p(), betas=(0.9, 0.99, 0.5)), ValueError, r"betas"),
        ("lion beta1=1", lambda: quadruple_lion(p(), betas=(1.0, 0.99)), ValueError, r"beta1"),
        ("lion beta2=nan", lambda: quadruple_lion(p(), betas=(0.9, NAN)), ValueError, r"beta2"),
        # Shampoo
        ("shampoo eps=0", lambda: quadruple_shampoo(p(), eps=0.0), ValueError, r"\beps\b"),
        ("shampoo eps=nan", lambda: quadruple_shampoo(p(), eps=NAN), ValueError, r"\beps\b"),
        ("shampoo eps=inf", lambda: quadruple_shampoo(p(), eps=INF), ValueError, r"\beps\b"),
        # Muon
        ("muon momentum=1", lambda: quadruple_muon(p(), momentum=1.0), ValueError, r"\bbeta\b|momentum"),
        ("muon momentum=nan", lambda: quadruple_muon(p(), momentum=NAN), ValueError, r"\bbeta\b|momentum"),
        ("muon eps=0", lambda: quadruple_muon(p(), eps=0.0), ValueError, r"\beps\b"),
        ("muon eps=nan", lambda: quadruple_muon(p(), eps=NAN), ValueError, r"\beps\b"),
        ("muon ns_steps=-1", lambda: quadruple_muon(p(), ns_steps=-1), ValueError, r"steps"),
        ("muon ns_steps=2.5", lambda: quadruple_muon(p(), ns_steps=2.5), TypeError, r"steps"),
        ("muon ns_coefficients of length 2", lambda: quadruple_muon(p(), ns_coefficients=(3.4, -4.7)), ValueError,
         r"coefficients"),
        ("muon ns_coefficients with nan", lambda: quadruple_muon(p(), ns_coefficients=(3.4, NAN, 2.0)), ValueError,
         r"coefficients"),
        ("muon adjust_lr_fn unknown", lambda: quadruple_muon(p(), adjust_lr_fn="rms"), ValueError, r"adjust_lr"),
        # the three new instances
        ("spectral momentum=1", lambda: quadruple_spectral(p(), momentum=1.0), ValueError, r"\bbeta\b|momentum"),
        ("spectral momentum=nan", lambda: quadruple_spectral(p(), momentum=NAN), ValueError, r"\bbeta\b|momentum"),
        ("tracking gain=0", lambda: quadruple_tracking(p(), gain=0.0), ValueError, r"gain"),
        ("tracking gain=nan", lambda: quadruple_tracking(p(), gain=NAN), ValueError, r"gain"),
        ("tracking beta2=1", lambda: quadruple_tracking(p(), beta2=1.0), ValueError, r"beta2"),
        ("tracking eps=0", lambda: quadruple_tracking(p(), eps=0.0), ValueError, r"\beps\b"),
        ("tracking eps=inf", lambda: quadruple_tracking(p(), eps=INF), ValueError, r"\beps\b"),
        ("tracking start unknown", lambda: quadruple_tracking(p(), start="random"), ValueError, r"start"),
        ("aligned weight=nan", lambda: quadruple_aligned(p(), weight=NAN), ValueError, r"weight"),
        ("aligned weight=inf", lambda: quadruple_aligned(p(), weight=INF), ValueError, r"weight"),
        ("aligned ratio<0", lambda: quadruple_aligned(p(), ratio=-1.0), ValueError, r"ratio"),
        ("aligned ratio=nan", lambda: quadruple_aligned(p(), ratio=NAN), ValueError, r"ratio"),
        ("aligned momentum=1", lambda: quadruple_aligned(p(), momentum=1.0), ValueError, r"\bbeta\b|momentum"),
        # QuadrupleOptimizer itself
        ("QuadrupleOptimizer lr=nan", lambda: QuadrupleOptimizer(p(), metric=Euclidean(), transition=NoMemory(),
                                                                  direction=Gradient(), lr=NAN), ValueError, r"\blr\b"),
        ("QuadrupleOptimizer maximize=str", lambda: QuadrupleOptimizer(p(), metric=Euclidean(), transition=NoMemory(),
                                                                        direction=Gradient(), maximize="yes"),
         TypeError, r"maximize"),
        # geometry: the norms' oracles on non-finite input
        ("Spectral.lmo NaN", lambda: Spectral().lmo(nan_matrix()), FloatingPointError, r"\bg\b.*NaN or Inf"),
        ("Spectral.lmo Inf", lambda: Spectral().lmo(nan_matrix(value=INF)), FloatingPointError, r"\bg\b.*NaN or Inf"),
        ("Spectral.sharp NaN", lambda: Spectral().sharp(nan_matrix()), FloatingPointError, r"\bg\b.*NaN or Inf"),
        ("Spectral.norm NaN", lambda: Spectral().norm(nan_matrix()), FloatingPointError, r"\bx\b.*NaN or Inf"),
        ("Spectral.dual_norm NaN", lambda: Spectral().dual_norm(nan_matrix()), FloatingPointError,
         r"\bg\b.*NaN or Inf"),
        ("Spectral.lmo NaN is a ValueError too", lambda: Spectral().lmo(nan_matrix()), ValueError, r"NaN or Inf"),
        ("L2.lmo NaN", lambda: L2().lmo(nan_matrix()), FloatingPointError, r"\bg\b.*NaN or Inf"),
        ("L2.lmo overflowing norm", lambda: L2().lmo(torch.full((3,), 1e30)), FloatingPointError,
         r"\bg\b.*(NaN or Inf|overflow)"),
        ("nsgd_step lr=nan", lambda: nsgd_step(tensors(), tensors(), None, [L2(), L2()],
                                               lr=NAN, beta=0.0, weight_decay=0.0, nesterov=False),
         ValueError, r"\blr\b"),
        ("nsgd_step beta=1", lambda: nsgd_step(tensors(), tensors(),
                                               tensors(), [L2(), L2()], lr=0.1,
                                               beta=1.0, weight_decay=0.0, nesterov=False), ValueError, r"\bbeta\b"),
        ("nsgd_step weight_decay<0", lambda: nsgd_step(tensors(), tensors(), None,
                                                       [L2(), L2()], lr=0.1, beta=0.0, weight_decay=-1.0,
                                                       nesterov=False), ValueError, r"weight_decay"),
        ("nsgd_step lists of different lengths", lambda: nsgd_step(tensors(), tensors()[:1], None, [L2(), L2()],
                                                                   lr=0.1, beta=0.0, weight_decay=0.0,
                                                                   nesterov=False), ValueError, r"grads"),
        # linalg
        ("polar NaN", lambda: polar(nan_matrix()), ValueError, r"\bx\b.*NaN or Inf"),
        ("polar Inf", lambda: polar(nan_matrix(value=-INF)), FloatingPointError, r"\bx\b.*NaN or Inf"),
        ("msign NaN", lambda: msign(nan_matrix()), ValueError, r"\bx\b.*NaN or Inf"),
        ("msign Inf", lambda: msign(nan_matrix(value=INF, dtype=torch.float32)), ValueError, r"\bx\b.*NaN or Inf"),
        ("msign overflowing norm", lambda: msign(torch.full((3, 4), 1e300, dtype=torch.float64)), ValueError,
         r"\bx\b.*(NaN or Inf|overflow)"),
        ("msign steps=2.5", lambda: msign(torch.ones(3, 4), steps=2.5), TypeError, r"steps"),
        ("msign coefficients of length 2", lambda: msign(torch.ones(3, 4), coefficients=(1.5, -0.5)), ValueError,
         r"coefficients"),
        ("truncated_svd NaN full", lambda: truncated_svd(nan_matrix(), 2, method="full"), ValueError,
         r"\bx\b.*NaN or Inf"),
        ("truncated_svd NaN randomized", lambda: truncated_svd(nan_matrix((40, 30)), 2, method="randomized"),
         ValueError, r"\bx\b.*NaN or Inf"),
    ]


PROBES = _per_optimizer() + _specific()


@pytest.mark.parametrize("thunk, error, pattern", [row[1:] for row in PROBES], ids=[row[0] for row in PROBES])
def test_bad_input_is_refused_naming_it(thunk, error, pattern):
    with pytest.raises(error, match=pattern):
        thunk()


# --- non-finite gradients: nothing moves ---------------------------------------------------------

def _snapshot(opt, ps):
    state = {i: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in opt.state[p].items()}
             for i, p in enumerate(ps) if p in opt.state}
    return [p.detach().clone() for p in ps], state


def _same(a, b):
    (pa, sa), (pb, sb) = a, b
    return (all(torch.equal(x, y) for x, y in zip(pa, pb)) and sa.keys() == sb.keys()
            and all(sa[i].keys() == sb[i].keys() and all(
                torch.equal(sa[i][k], sb[i][k]) if torch.is_tensor(sa[i][k]) else sa[i][k] == sb[i][k]
                for k in sa[i]) for i in sa))


def _run(name, bad_at=None, skip=False, steps=4):
    """``steps`` steps on fixed random gradients; at step ``bad_at`` the gradient of
    parameter 1 holds a NaN. Returns the optimizer, the parameters and the snapshots after
    each step."""
    ps = params()
    opt = OPTIMIZERS[name](ps, skip_nonfinite=skip)
    snaps = []
    for k in range(steps):
        set_grads(ps, seed=10 + k, bad=NAN if k == bad_at else None, where=1)
        opt.step()
        snaps.append(_snapshot(opt, ps))
    return opt, ps, snaps


@pytest.mark.parametrize("name", NAMES)
def test_a_refused_nonfinite_step_changes_nothing(name):
    ps = params()
    opt = OPTIMIZERS[name](ps)
    set_grads(ps, seed=5)
    opt.step()
    before = _snapshot(opt, ps)
    set_grads(ps, seed=6, bad=-INF, where=0)
    with pytest.raises(FloatingPointError, match=r"parameter 0 of group 0 \(shape \(3, 4\)\).*skip_nonfinite"):
        opt.step()
    assert _same(before, _snapshot(opt, ps))


@pytest.mark.parametrize("name", NAMES)
def test_skip_nonfinite_skips_the_step_without_touching_the_state(name):
    opt, ps, snaps = _run(name, bad_at=2, skip=True)
    assert opt.skipped_steps == 1
    assert _same(snaps[1], snaps[2])  # the NaN step left parameters and state (step counters too) alone
    # and the run goes on as one that never saw that gradient: compare with steps 0, 1, 3
    ref_ps = params()
    ref = OPTIMIZERS[name](ref_ps)
    for k in (0, 1, 3):
        set_grads(ref_ps, seed=10 + k)
        ref.step()
    assert _same(snaps[3], _snapshot(ref, ref_ps))


@pytest.mark.parametrize("name", NAMES)
def test_skip_nonfinite_skips_before_the_first_state_is_made(name):
    ps = params()
    opt = OPTIMIZERS[name](ps, skip_nonfinite=True)
    set_grads(ps, bad=NAN, where=1)
    opt.step()
    assert opt.skipped_steps == 1 and len(opt.state) == 0
    assert all(torch.equal(p, q) for p, q in zip(ps, params()))


def test_the_check_runs_once_per_step_not_once_per_parameter(monkeypatch):
    """The finite check is one fused reduction per device (here one: CPU), and the slow
    search for the culprit runs only when that reduction saw a non-finite value."""
    from neurips26.optim import _shell

    calls = []
    real = _shell.finite_flag
    monkeypatch.setattr(_shell, "finite_flag", lambda ts, *a, **k: calls.append(len(ts)) or real(ts, *a, **k))
    ps = params(shapes=((3, 4), (4, 5), (5,), (2, 2)))
    opt = quadruple_adamw([{"params": ps[:2]}, {"params": ps[2:], "weight_decay": 0.0}])
    monkeypatch.setattr(opt, "_find_nonfinite", lambda: pytest.fail("searched on a finite step"))
    set_grads(ps)
    opt.step()
    assert calls == [4]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(NAMES), which=st.integers(0, 2), entry=st.integers(0, 5),
       value=st.sampled_from([NAN, INF, -INF]))
def test_any_nonfinite_entry_of_any_gradient_is_named(name, which, entry, value):
    shapes = ((3, 4), (4, 5), (2, 3))
    ps = params(shapes=shapes)
    opt = OPTIMIZERS[name]([{"params": ps[:2]}, {"params": ps[2:]}])
    set_grads(ps)
    ps[which].grad.view(-1)[entry] = value
    group, index = (0, which) if which < 2 else (1, 0)
    shape = re.escape(str(shapes[which]))
    with pytest.raises(FloatingPointError, match=rf"parameter {index} of group {group} \(shape {shape}\)"):
        opt.step()


# --- settings: what is accepted ------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(lr=st.floats(allow_nan=True, allow_infinity=True), name=st.sampled_from(NAMES))
def test_lr_is_accepted_exactly_when_finite_and_positive(lr, name):
    if math.isfinite(lr) and lr > 0:
        OPTIMIZERS[name](params(), lr=lr)
    else:
        with pytest.raises(ValueError, match=r"\blr\b"):
            OPTIMIZERS[name](params(), lr=lr)


@settings(max_examples=60, deadline=None)
@given(b1=st.floats(allow_nan=True, allow_infinity=True), b2=st.floats(allow_nan=True, allow_infinity=True),
       make=st.sampled_from([quadruple_adam, quadruple_adamw, quadruple_lion]))
def test_betas_are_accepted_exactly_in_the_unit_interval(b1, b2, make):
    if 0 <= b1 < 1 and 0 <= b2 < 1:
        make(params(), betas=(b1, b2))
    else:
        with pytest.raises(ValueError, match=r"beta1" if not 0 <= b1 < 1 else r"beta2"):
            make(params(), betas=(b1, b2))


@pytest.mark.parametrize("name", NAMES)
def test_a_failed_add_param_group_leaves_the_optimizer_as_it_was(name):
    ps = params()
    opt = OPTIMIZERS[name](ps[:1])
    with pytest.raises(ValueError, match=r"\blr\b"):
        opt.add_param_group({"params": ps[1:], "lr": NAN})
    assert len(opt.param_groups) == 1
    opt.add_param_group({"params": ps[1:], "lr": 0.0})  # a group with lr 0 is a frozen group, as in torch
    assert len(opt.param_groups) == 2


def test_a_negative_lr_set_after_construction_is_accepted_as_torch_accepts_it():
    """torch.optim checks lr >= 0 only at construction; a scheduler (or a hand) may set a
    negative one later, and the step then ascends. The quadruple does the same, bit for bit."""
    def run(make):
        ps = params()
        opt = make(ps)
        for k in range(5):
            opt.param_groups[0]["lr"] = 0.1 if k < 2 else -0.05
            set_grads(ps, seed=20 + k)
            opt.step()
        return ps

    ours = run(lambda ps: quadruple_sgd(ps, lr=0.1, momentum=0.9))
    ref = run(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=False))
    assert all(torch.equal(a, b) for a, b in zip(ours, ref))
    run(lambda ps: NSGD(ps, lr=0.1))  # NSGD accepts it too


def test_numpy_numbers_are_accepted_wherever_python_numbers_are():
    ps = params()
    opt = quadruple_adam(ps, lr=np.float32(1e-2), betas=(np.float64(0.9), np.float32(0.99)), eps=np.float64(1e-8),
                         weight_decay=np.float32(0.0), maximize=np.bool_(False))
    quadruple_muon(params(), momentum=np.float32(0.9), ns_steps=np.int64(3), eps=np.float32(1e-7))
    NSGD(params(), lr=np.float32(0.1), beta=np.float64(0.5))
    opt.param_groups[0]["lr"] = np.float64(1e-3)  # as a numpy-based scheduler would
    set_grads(ps)
    opt.step()


@pytest.mark.parametrize("name", NAMES)
def test_empty_parameters_step(name):
    p = torch.nn.Parameter(torch.zeros(0, 3, dtype=torch.float64))
    opt = OPTIMIZERS[name]([p, *params()])
    p.grad = torch.zeros(0, 3, dtype=torch.float64)
    opt.step()
    assert p.shape == (0, 3)


def test_a_state_dict_saved_before_maximize_existed_loads():
    ps = params()
    opt = quadruple_adam(ps, lr=1e-2)
    set_grads(ps)
    opt.step()
    saved = copy.deepcopy(opt.state_dict())
    for group in saved["param_groups"]:
        del group["maximize"]
    other = quadruple_adam(params(), lr=1e-2)
    other.load_state_dict(saved)
    assert other.param_groups[0]["maximize"] is False
    set_grads(other.param_groups[0]["params"])
    other.step()


# --- maximize, as torch.optim has it -------------------------------------------------------------

def _train(make_opt, sign=1.0, steps=60):
    """A small regression (the problem of test_quadruple), loss sign · mse."""
    generator = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64) * 0.5)
    X = torch.randn(64, 5, generator=generator, dtype=torch.float64)
    y = torch.randn(64, 3, generator=generator, dtype=torch.float64)
    opt = make_opt(model.parameters())
    for k in range(steps):
        idx = slice((k * 8) % 64, (k * 8) % 64 + 8)
        opt.zero_grad()
        (sign * torch.nn.functional.mse_loss(model(X[idx]), y[idx])).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


MAXIMIZE = [
    ("sgd", quadruple_sgd, torch.optim.SGD, dict(lr=0.02, momentum=0.9, weight_decay=1e-2)),
    ("sgd-nesterov", quadruple_sgd, torch.optim.SGD, dict(lr=0.02, momentum=0.8, nesterov=True)),
    ("sgd-plain", quadruple_sgd, torch.optim.SGD, dict(lr=0.05, weight_decay=0.01)),
    ("adam", quadruple_adam, torch.optim.Adam, dict(lr=1e-2, weight_decay=0.05)),
    ("adam-amsgrad", quadruple_adam, torch.optim.Adam, dict(lr=1e-2, amsgrad=True)),
    ("adamw", quadruple_adamw, torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
]


@pytest.mark.parametrize("ours, theirs, kw", [m[1:] for m in MAXIMIZE], ids=[m[0] for m in MAXIMIZE])
def test_maximize_is_torch_optims(ours, theirs, kw):
    """maximize=True on −f is the minimizing run on f: bit for bit for ours and for torch's
    (the gradient is negated exactly, before the weight decay, as torch does). Against
    torch's maximize run: bit for bit for SGD, and for Adam/AdamW to the same ≤ 1e-6 as
    without maximize (our Adam folds 1/(1 − β₁ᵗ) into the step size, torch divides lr by it:
    a last-bit difference that is there without maximize too)."""
    mine = _train(lambda p: ours(p, maximize=True, **kw), sign=-1.0)
    assert torch.equal(mine, _train(lambda p: ours(p, **kw)))
    torch_max = _train(lambda p: theirs(p, maximize=True, foreach=False, **kw), sign=-1.0)
    assert torch.equal(torch_max, _train(lambda p: theirs(p, foreach=False, **kw)))
    if ours is quadruple_sgd:
        assert torch.equal(mine, torch_max)
    else:
        assert float((mine - torch_max).norm() / torch_max.norm()) <= 1e-6
    # and maximize does move the run: ascending f is not descending it
    assert not torch.allclose(_train(lambda p: ours(p, maximize=True, **kw)), mine)


def test_maximize_is_per_group_as_in_torch():
    def run(make):
        ps = params()
        opt = make([{"params": ps[:1], "maximize": True}, {"params": ps[1:]}])
        for k in range(4):
            set_grads(ps, seed=30 + k)
            opt.step()
        return ps

    ours = run(lambda groups: quadruple_sgd(groups, lr=0.1, momentum=0.5))
    ref = run(lambda groups: torch.optim.SGD(groups, lr=0.1, momentum=0.5, foreach=False))
    assert all(torch.equal(a, b) for a, b in zip(ours, ref))


@pytest.mark.parametrize("fused", [False, True], ids=["sums (CPU)", "fused max-abs (accelerators)"])
def test_both_ways_of_the_finite_flag_see_every_nonfinite_value(fused):
    from neurips26.optim._shell import finite_flag

    for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.float16):
        grads = [torch.randn(5, 4).to(dtype), torch.randn(7).to(dtype), torch.randn(()).to(dtype)]
        assert bool(finite_flag(grads, fused))
        for value in (NAN, INF, -INF):
            for i in range(3):
                bad = [g.clone() for g in grads]
                bad[i].view(-1)[-1] = value
                assert not bool(finite_flag(bad, fused)), (dtype, value, i)


def test_an_overflowing_sum_of_finite_gradients_is_no_false_alarm():
    """On the CPU the flag sums each gradient; a sum of finite entries may overflow, and the
    exact search then finds nothing to refuse: the step goes on."""
    p = torch.nn.Parameter(torch.zeros(4))
    opt = quadruple_sgd([p], lr=1e-38)
    p.grad = torch.full((4,), 3e38)
    opt.step()
    assert torch.isfinite(p).all() and (p < 0).all()


def test_the_unchecked_oracles_behave_as_documented():
    """The elementwise oracles (and the Newton-Schulz LMO) do not check, to stay free of host
    reads on their hot path; geometry's docstring says what they give, and the optimizers
    check the gradients before calling them (see the NSGD rows of PROBES)."""
    g = torch.tensor([[1.0, NAN], [-2.0, 3.0]])
    assert torch.equal(Linf().lmo(g), torch.tensor([[1.0, 0.0], [-1.0, 1.0]]))  # torch.sign(NaN) = 0
    assert torch.isnan(Spectral(exact=False).lmo(g)).all()
    assert torch.isnan(L2().norm(g)) and torch.isnan(Linf().dual_norm(g))
