"""Bad input to the bayesopt field's public entry points: every probe must raise a
ValueError / TypeError whose message names the argument (issue 22, section 5).

Classes of bad input: NaN, inf, empty, wrong shape, wrong dtype / type, out-of-range
settings, files that are not what they claim to be. The probes are listed as data (one
``(name, call, exception, pattern)`` row each) so that their count is the module's count."""

import math

import pytest
import torch

pytest.importorskip("botorch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from neurips26.bayesopt import (BUCB, AsyncBayesOpt, AsyncResult, BatchUpperConfidenceBound,  # noqa: E402
                                EIThresholdRule, EpsDeltaRule, ExpectedRBFKernel, FixedBudget, KrigingBeliever,
                                LocalPenalization, LocallyPenalizedAcquisition, MarginalizedQuadraticKernel, QLogNEI,
                                SearchSpace, UCBLCBGapRule, bayes_opt_loop, fantasize, fit_gp, gp_posterior, gp_ucb,
                                interpolated_metric, irgp_beta, isotropic_ball, mahalanobis_ball, regret_bounds,
                                simulate_async, trust_region_box)
from neurips26.bayesopt.lsbo import LatentSpaceBO  # noqa: E402

f64 = torch.float64
NAN, INF = float("nan"), float("inf")
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=f64)
SPACE = SearchSpace(BOUNDS, num_restarts=2, raw_samples=32)
X = torch.tensor([[0.1, 0.2], [0.5, 0.9], [0.8, 0.3], [0.3, 0.6]], dtype=f64)
Y = torch.tensor([0.3, -0.2, 0.5, 0.1], dtype=f64)


def _nan_at(t, i=0):
    t = t.clone()
    t.view(-1)[i] = NAN
    return t


def _inf_at(t, i=0):
    t = t.clone()
    t.view(-1)[i] = INF
    return t


def _model():
    return fit_gp(X, Y, BOUNDS, noise=1e-3, fit=False)


def _ucb(model):
    from botorch.acquisition import UpperConfidenceBound

    return UpperConfidenceBound(model, beta=2.0)


def _bo(**kw):
    from concurrent.futures import ThreadPoolExecutor

    args = dict(objective=lambda x: 0.0, space=SPACE, proposer=BUCB(SPACE), executor=ThreadPoolExecutor(1),
                n_workers=1)
    args.update(kw)
    return AsyncBayesOpt(**args)


def _kernel_call(kernel, a, b=None):
    b = a if b is None else b
    return kernel.forward(a, b)


def _journal_file(tmp_path, text):
    p = tmp_path / "j.jsonl"
    p.write_text(text)
    return p


class _Codec:  # the least LatentSpaceBO's constructor needs
    latent_dim = 2


# (id, call(tmp_path), exception, regex the message must match)
PROBES = [
    # --- fit_gp ------------------------------------------------------------------------------
    ("fit_gp X nan", lambda p: fit_gp(_nan_at(X, 3), Y, BOUNDS), ValueError, r"\bX\b.*(NaN|finite)"),
    ("fit_gp X inf", lambda p: fit_gp(_inf_at(X, 1), Y, BOUNDS), ValueError, r"\bX\b.*(inf|finite)"),
    ("fit_gp Y nan", lambda p: fit_gp(X, _nan_at(Y, 2), BOUNDS), ValueError, r"\bY\b.*(NaN|finite)"),
    ("fit_gp Y inf", lambda p: fit_gp(X, _inf_at(Y, 2), BOUNDS), ValueError, r"\bY\b.*(inf|finite)"),
    ("fit_gp X 1-d", lambda p: fit_gp(X[:, 0], Y), ValueError, r"\bX\b.*\(n, d\)"),
    ("fit_gp X empty", lambda p: fit_gp(X[:0], Y[:0], BOUNDS), ValueError, r"\bX\b.*(empty|n >= 1)"),
    ("fit_gp Y length", lambda p: fit_gp(X, Y[:3], BOUNDS), ValueError, r"\bY\b.*3.*4|\bY\b.*4.*3"),
    ("fit_gp Y 2 columns", lambda p: fit_gp(X, torch.stack([Y, Y], -1), BOUNDS), ValueError, r"\bY\b"),
    ("fit_gp bounds width", lambda p: fit_gp(X, Y, torch.tensor([[0.0] * 3, [1.0] * 3], dtype=f64)), ValueError,
     r"bounds.*\(2, 2\)"),
    ("fit_gp bounds nan", lambda p: fit_gp(X, Y, _nan_at(BOUNDS)), ValueError, r"bounds.*finite"),
    ("fit_gp noise negative", lambda p: fit_gp(X, Y, BOUNDS, noise=-1e-3), ValueError, r"noise"),
    ("fit_gp noise nan", lambda p: fit_gp(X, Y, BOUNDS, noise=NAN), ValueError, r"noise"),
    ("fit_gp X int dtype", lambda p: fit_gp(X.round().long(), Y, BOUNDS), TypeError, r"\bX\b.*float"),
    ("fit_gp X list", lambda p: fit_gp(X.tolist(), Y, BOUNDS), TypeError, r"\bX\b.*[Tt]ensor"),
    ("fit_gp kernel width", lambda p: fit_gp(X, Y, covar_module=_rbf(ard=3)), ValueError,
     r"covar_module.*ard_num_dims=3.*\b2\b"),
    ("fit_gp marginalized latent_dims", lambda p: fit_gp(torch.rand(5, 4, dtype=f64), torch.rand(5, dtype=f64),
                                                         normalize=False,
                                                         covar_module=MarginalizedQuadraticKernel(latent_dims=3)),
     ValueError, r"latent_dims=3.*\b2\b"),
    # --- SearchSpace ---------------------------------------------------------------------------
    ("space bounds nan", lambda p: SearchSpace(_nan_at(BOUNDS)), ValueError, r"bounds.*finite"),
    ("space bounds inf", lambda p: SearchSpace(torch.tensor([[-INF, 0.0], [INF, 1.0]])), ValueError,
     r"bounds.*finite"),
    ("space bounds reversed", lambda p: SearchSpace(BOUNDS.flip(0)), ValueError, r"bounds.*lower < upper"),
    ("space bounds shape", lambda p: SearchSpace(torch.zeros(3, 2)), ValueError, r"bounds.*\(2, d\)"),
    ("space bounds empty", lambda p: SearchSpace(torch.zeros(2, 0)), ValueError, r"bounds.*d >= 1"),
    ("space candidates nan", lambda p: SearchSpace(BOUNDS, candidates=_nan_at(X)), ValueError,
     r"candidates.*finite"),
    ("space candidates width", lambda p: SearchSpace(BOUNDS, candidates=torch.rand(4, 3)), ValueError,
     r"candidates.*\(N, 2\)"),
    ("space candidates empty", lambda p: SearchSpace(BOUNDS, candidates=torch.rand(0, 2)), ValueError,
     r"candidates"),
    ("space num_restarts 0", lambda p: SearchSpace(BOUNDS, num_restarts=0), ValueError, r"num_restarts"),
    ("space raw_samples 0", lambda p: SearchSpace(BOUNDS, raw_samples=0), ValueError, r"raw_samples"),
    ("space chunk 0", lambda p: SearchSpace(BOUNDS, chunk=0), ValueError, r"chunk"),
    ("space num_restarts float", lambda p: SearchSpace(BOUNDS, num_restarts=2.5), TypeError, r"num_restarts"),
    # --- AsyncBayesOpt -------------------------------------------------------------------------
    ("async n_workers 0", lambda p: _bo(n_workers=0), ValueError, r"n_workers"),
    ("async n_workers float", lambda p: _bo(n_workers=1.5), TypeError, r"n_workers"),
    ("async max_attempts 0", lambda p: _bo(max_attempts=0), ValueError, r"max_attempts"),
    ("async n_init 0", lambda p: _bo(n_init=0), ValueError, r"n_init"),
    ("async n_init negative", lambda p: _bo(n_init=-3), ValueError, r"n_init"),
    ("async space type", lambda p: _bo(space=BOUNDS), TypeError, r"space.*SearchSpace"),
    ("async objective type", lambda p: _bo(objective=3.0), TypeError, r"objective.*callable"),
    ("async proposer type", lambda p: _bo(proposer=object()), TypeError, r"proposer.*propose"),
    ("async max_evals negative", lambda p: _bo().run(max_evals=-1), ValueError, r"max_evals"),
    ("async max_evals float", lambda p: _bo().run(max_evals=2.5), TypeError, r"max_evals"),
    ("async journal text file", lambda p: _bo(journal=_journal_file(p, "my notes\nnot json\n")), ValueError,
     r"journal .*j\.jsonl is not an AsyncBayesOpt journal"),
    ("async journal json lines", lambda p: _bo(journal=_journal_file(p, '{"a": 1}\n{"b": 2}\n')), ValueError,
     r"journal .*j\.jsonl is not an AsyncBayesOpt journal"),
    ("async journal newer version", lambda p: _bo(journal=_journal_file(
        p, '{"format": "neurips26.bayesopt.AsyncBayesOpt journal", "version": 99, "dim": 2}\n')),
     ValueError, r"journal .*j\.jsonl.*newer version.*version 99"),
    ("async journal other dim", lambda p: _bo(journal=_journal_file(
        p, '{"format": "neurips26.bayesopt.AsyncBayesOpt journal", "version": 1, "dim": 5}\n')),
     ValueError, r"journal .*j\.jsonl.*dim 5.*dim 2"),
    ("AsyncResult.best empty", lambda p: AsyncResult(torch.zeros(0, 2, dtype=f64), torch.zeros(0, dtype=f64),
                                                     failed=[([0.1, 0.2], "RuntimeError: boom")]).best,
     ValueError, r"no successful evaluation.*1 failed"),
    # --- simulate_async ------------------------------------------------------------------------
    ("simulate n_workers 0", lambda p: simulate_async(_sphere, BUCB(SPACE), SPACE, _factory, 0, 3, 2), ValueError,
     r"n_workers"),
    ("simulate budget negative", lambda p: simulate_async(_sphere, BUCB(SPACE), SPACE, _factory, 1, -1, 2),
     ValueError, r"budget"),
    ("simulate n_init 0", lambda p: simulate_async(_sphere, BUCB(SPACE), SPACE, _factory, 1, 2, 0), ValueError,
     r"n_init"),
    ("simulate noise_std nan", lambda p: simulate_async(_sphere, BUCB(SPACE), SPACE, _factory, 1, 2, 2,
                                                        noise_std=NAN), ValueError, r"noise_std"),
    ("simulate noise_std negative", lambda p: simulate_async(_sphere, BUCB(SPACE), SPACE, _factory, 1, 2, 2,
                                                             noise_std=-0.1), ValueError, r"noise_std"),
    # --- kernels -------------------------------------------------------------------------------
    ("expected-rbf latent_dims", lambda p: _kernel_call(ExpectedRBFKernel(latent_dims=3), torch.rand(4, 4)),
     ValueError, r"ExpectedRBFKernel.*latent_dims=3.*\b2\b"),
    ("marginalized diag latent_dims", lambda p: _kernel_call(MarginalizedQuadraticKernel(latent_dims=3),
                                                             torch.rand(4, 4)),
     ValueError, r"MarginalizedQuadraticKernel.*latent_dims=3.*\b2\b"),
    ("marginalized full latent_dims", lambda p: _kernel_call(
        MarginalizedQuadraticKernel(covariance="full", latent_dims=3), torch.rand(4, 6)),
     ValueError, r"latent_dims=3.*\b2\b"),
    ("kernel odd width", lambda p: _kernel_call(ExpectedRBFKernel(), torch.rand(4, 5)), ValueError,
     r"width.*5"),
    ("kernel full width", lambda p: _kernel_call(MarginalizedQuadraticKernel(covariance="full"), torch.rand(4, 5)),
     ValueError, r"width.*5"),
    ("kernel x1 x2 widths", lambda p: _kernel_call(ExpectedRBFKernel(), torch.rand(4, 4), torch.rand(3, 6)),
     ValueError, r"x1.*4.*x2.*6|x1.*2.*x2.*3"),
    ("kernel latent_dims 0", lambda p: ExpectedRBFKernel(latent_dims=0), ValueError, r"latent_dims"),
    ("kernel covariance", lambda p: MarginalizedQuadraticKernel(covariance="dense"), ValueError, r"covariance"),
    # --- fantasize and proposers ---------------------------------------------------------------
    ("fantasize X nan", lambda p: fantasize(_model(), _nan_at(X[:2])), ValueError, r"\bX\b.*(NaN|finite)"),
    ("fantasize X width", lambda p: fantasize(_model(), torch.rand(2, 3, dtype=f64)), ValueError,
     r"\bX\b.*\b3\b.*\b2\b|\bX\b.*\(n, 2\)"),
    ("fantasize fantasy", lambda p: fantasize(_model(), X[:1], fantasy="z"), ValueError, r"fantasy"),
    ("KB pending nan", lambda p: KrigingBeliever(_ucb, SPACE).propose(_model(), 1, pending=_nan_at(X[:2])),
     ValueError, r"pending.*(NaN|finite)"),
    ("KB pending width", lambda p: KrigingBeliever(_ucb, SPACE).propose(_model(), 1,
                                                                       pending=torch.rand(2, 3, dtype=f64)),
     ValueError, r"pending.*\(p, 2\)"),
    ("KB lie nan", lambda p: KrigingBeliever(_ucb, SPACE, fantasy="liar", lie=NAN), ValueError, r"lie"),
    ("KB q 0", lambda p: KrigingBeliever(_ucb, SPACE).propose(_model(), 0), ValueError, r"\bq\b"),
    ("BUCB pending nan", lambda p: BUCB(SPACE).propose(_model(), 1, pending=_nan_at(X[:2], 1)), ValueError,
     r"pending.*(NaN|finite)"),
    ("BUCB pending inf", lambda p: BUCB(SPACE).propose(_model(), 1, pending=_inf_at(X[:2], 1)), ValueError,
     r"pending.*(inf|finite)"),
    ("BUCB beta nan", lambda p: BUCB(SPACE, beta=NAN), ValueError, r"beta"),
    ("BUCB beta inf", lambda p: BUCB(SPACE, beta=INF), ValueError, r"beta"),
    ("LP pending nan", lambda p: LocalPenalization(_ucb, SPACE, n_lipschitz=16).propose(
        _model(), 1, pending=_nan_at(X[:2])), ValueError, r"pending.*(NaN|finite)"),
    ("LP n_lipschitz 0", lambda p: LocalPenalization(_ucb, SPACE, n_lipschitz=0), ValueError, r"n_lipschitz"),
    ("QLogNEI pending nan", lambda p: QLogNEI(SPACE, mc_samples=8).propose(_model(), 1, pending=_nan_at(X[:2])),
     ValueError, r"pending.*(NaN|finite)"),
    ("QLogNEI mc_samples 0", lambda p: QLogNEI(SPACE, mc_samples=0), ValueError, r"mc_samples"),
    ("irgp domain_size nan", lambda p: irgp_beta(NAN), ValueError, r"domain_size"),
    ("irgp domain_size 1", lambda p: irgp_beta(1), ValueError, r"domain_size"),
    # --- acquisitions --------------------------------------------------------------------------
    ("BUCB-acq beta nan", lambda p: BatchUpperConfidenceBound(_model(), NAN), ValueError, r"beta"),
    ("BUCB-acq X_pending nan", lambda p: BatchUpperConfidenceBound(_model(), 2.0, X_pending=_nan_at(X[:2])),
     ValueError, r"X_pending.*(NaN|finite)"),
    ("LP-acq lipschitz nan", lambda p: LocallyPenalizedAcquisition(_model(), _ucb(_model()), NAN, 0.5), ValueError,
     r"lipschitz"),
    ("LP-acq best_f nan", lambda p: LocallyPenalizedAcquisition(_model(), _ucb(_model()), 1.0, NAN), ValueError,
     r"best_f"),
    ("LP-acq X_pending nan", lambda p: LocallyPenalizedAcquisition(_model(), _ucb(_model()), 1.0, 0.5,
                                                                   X_pending=_nan_at(X[:2])),
     ValueError, r"X_pending.*(NaN|finite)"),
    # --- stopping ------------------------------------------------------------------------------
    ("EpsDelta eps nan", lambda p: EpsDeltaRule(NAN, 0.1), ValueError, r"eps"),
    ("EpsDelta delta 1", lambda p: EpsDeltaRule(0.1, 1.0), ValueError, r"delta"),
    ("UCBLCB eps nan", lambda p: UCBLCBGapRule(NAN), ValueError, r"eps"),
    ("UCBLCB eps negative", lambda p: UCBLCBGapRule(-1.0), ValueError, r"eps"),
    ("EI threshold nan", lambda p: EIThresholdRule(NAN), ValueError, r"threshold"),
    ("FixedBudget 0", lambda p: FixedBudget(0), ValueError, r"budget"),
    ("FixedBudget float", lambda p: FixedBudget(2.5), TypeError, r"budget"),
    ("regret_bounds delta 0", lambda p: regret_bounds(1, 0.5, 4.0, 0.0), ValueError, r"delta"),
    ("regret_bounds sigma nan", lambda p: regret_bounds(1, NAN, 4.0, 0.1), ValueError, r"sigma"),
    ("gp_posterior noise negative", lambda p: gp_posterior(torch.eye(3, dtype=f64), [0], torch.ones(1, dtype=f64),
                                                           -1.0), ValueError, r"noise"),
    ("gp_posterior y length", lambda p: gp_posterior(torch.eye(3, dtype=f64), [0, 1], torch.ones(1, dtype=f64),
                                                     0.1), ValueError, r"\by\b.*observed"),
    ("gp_ucb max_iter 0", lambda p: gp_ucb(torch.ones(3, dtype=f64), torch.eye(3, dtype=f64), 0.1, FixedBudget(2),
                                           0.1, 0), ValueError, r"max_iter"),
    ("gp_ucb K shape", lambda p: gp_ucb(torch.ones(3, dtype=f64), torch.eye(4, dtype=f64), 0.1, FixedBudget(2),
                                        0.1, 3), ValueError, r"\bK\b.*\bf\b|\bf\b.*\bK\b"),
    ("loop bounds nan", lambda p: bayes_opt_loop(_sphere, _nan_at(BOUNDS), FixedBudget(2), max_iter=2),
     ValueError, r"bounds.*finite"),
    ("loop n_init 0", lambda p: bayes_opt_loop(_sphere, BOUNDS, FixedBudget(2), n_init=0, max_iter=2), ValueError,
     r"n_init"),
    ("loop max_iter 0", lambda p: bayes_opt_loop(_sphere, BOUNDS, FixedBudget(2), max_iter=0), ValueError,
     r"max_iter"),
    ("loop n_candidates 0", lambda p: bayes_opt_loop(_sphere, BOUNDS, FixedBudget(2), n_candidates=0, max_iter=2),
     ValueError, r"n_candidates"),
    ("loop noise negative", lambda p: bayes_opt_loop(_sphere, BOUNDS, FixedBudget(2), noise=-1.0, max_iter=2),
     ValueError, r"noise"),
    ("loop candidates nan", lambda p: bayes_opt_loop(_sphere, BOUNDS, FixedBudget(2), candidates=_nan_at(X),
                                                     max_iter=2), ValueError, r"candidates.*finite"),
    # --- geometry ------------------------------------------------------------------------------
    ("ball radius nan", lambda p: mahalanobis_ball(torch.zeros(2, dtype=f64), torch.eye(2, dtype=f64), NAN, 4),
     ValueError, r"radius"),
    ("ball n negative", lambda p: isotropic_ball(torch.zeros(2, dtype=f64), 1.0, -1), ValueError, r"\bn\b"),
    ("ball metric not PD", lambda p: mahalanobis_ball(torch.zeros(2, dtype=f64), -torch.eye(2, dtype=f64), 1.0, 4),
     ValueError, r"metric.*positive definite"),
    ("ball center nan", lambda p: isotropic_ball(torch.tensor([NAN, 0.0], dtype=f64), 1.0, 4), ValueError,
     r"center.*finite"),
    ("metric bandwidth nan", lambda p: interpolated_metric(torch.zeros(2), torch.zeros(3, 2), torch.ones(3, 2),
                                                           bandwidth=NAN), ValueError, r"bandwidth"),
    ("metric covs shape", lambda p: interpolated_metric(torch.zeros(2), torch.zeros(3, 2), torch.ones(4, 2)),
     ValueError, r"train_covs"),
    ("box lengths negative", lambda p: trust_region_box(torch.zeros(2), -torch.ones(2), 4, -torch.ones(2),
                                                        torch.ones(2)), ValueError, r"lengths"),
    ("box lower upper", lambda p: trust_region_box(torch.zeros(2), torch.ones(2), 4, torch.ones(2), -torch.ones(2)),
     ValueError, r"lower.*upper"),
    # --- LatentSpaceBO -------------------------------------------------------------------------
    ("lsbo batch_size 0", lambda p: LatentSpaceBO(_Codec(), len, batch_size=0), ValueError, r"batch_size"),
    ("lsbo n_candidates 0", lambda p: LatentSpaceBO(_Codec(), len, n_candidates=0), ValueError, r"n_candidates"),
    ("lsbo length_init nan", lambda p: LatentSpaceBO(_Codec(), len, length_init=NAN), ValueError, r"length_init"),
    ("lsbo length_min > max", lambda p: LatentSpaceBO(_Codec(), len, length_min=4.0, length_max=3.2), ValueError,
     r"length_min.*length_max"),
    ("lsbo finetune_every negative", lambda p: LatentSpaceBO(_Codec(), len, finetune_every=-1), ValueError,
     r"finetune_every"),
]


def _rbf(ard):
    from gpytorch.kernels import RBFKernel

    return RBFKernel(ard_num_dims=ard)


def _sphere(x):
    return -((torch.as_tensor(x) - 0.5) ** 2).sum(-1)


def _factory(X, Y):
    return fit_gp(X, Y, BOUNDS, noise=1e-3, fit=False)


@pytest.mark.parametrize("name, call, exc, pattern", PROBES, ids=[p[0] for p in PROBES])
def test_probe(tmp_path, name, call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(tmp_path)


def test_probe_count():  # the report quotes this number
    assert len(PROBES) == len({p[0] for p in PROBES}) == 110


@settings(max_examples=40, deadline=None)
@given(i=st.integers(0, 7), bad=st.sampled_from([NAN, INF, -INF]))
def test_fit_gp_names_any_non_finite_entry(i, bad):
    """Wherever the non-finite value sits, in X or in Y, the error names the argument."""
    Xb = X.clone()
    Xb.view(-1)[i] = bad
    with pytest.raises(ValueError, match=r"\bX\b"):
        fit_gp(Xb, Y, BOUNDS)
    Yb = Y.clone()
    Yb[i % 4] = bad
    with pytest.raises(ValueError, match=r"\bY\b"):
        fit_gp(X, Yb, BOUNDS)


@settings(max_examples=30, deadline=None)
@given(lo=st.floats(allow_nan=True, allow_infinity=True), width=st.floats(allow_nan=True, allow_infinity=True))
def test_search_space_accepts_exactly_finite_boxes(lo, width):
    hi = lo + width
    b = torch.tensor([[lo, 0.0], [hi, 1.0]], dtype=f64)
    if math.isfinite(lo) and math.isfinite(hi) and lo < hi:
        assert SearchSpace(b).dim == 2
    else:
        with pytest.raises(ValueError, match="bounds"):
            SearchSpace(b)


def test_fit_gp_convergence_failure_keeps_warm_start_with_a_warning(monkeypatch):
    """A fit whose every attempt ends in an optimizer warning (BoTorch's ModelFittingError)
    keeps the warm-started hyperparameters and says so with a warning; strict=True raises."""
    import botorch.fit
    from botorch.exceptions.errors import ModelFittingError

    from neurips26.bayesopt import GPFitWarning

    warm = fit_gp(X, Y, BOUNDS)
    state = warm.state_dict()

    def fail(*a, **k):
        raise ModelFittingError("All attempts to fit the model have failed.")

    monkeypatch.setattr(botorch.fit, "fit_gpytorch_mll", fail)
    with pytest.warns(GPFitWarning, match="warm-started"):
        model = fit_gp(X, Y, BOUNDS, state=state)
    assert torch.equal(model.covar_module.lengthscale, warm.covar_module.lengthscale)
    with pytest.raises(ModelFittingError):
        fit_gp(X, Y, BOUNDS, state=state, strict=True)


def test_fit_gp_real_errors_propagate_with_the_cause(monkeypatch):
    import botorch.fit

    def boom(*a, **k):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(botorch.fit, "fit_gpytorch_mll", boom)
    with pytest.raises(RuntimeError, match="mat1 and mat2") as info:
        fit_gp(X, Y, BOUNDS)
    assert any("fit_gp" in n for n in getattr(info.value, "__notes__", []))
