"""Reproduction: HyperP (Muon on the Frobenius sphere with learning-rate transfer rules)
and SqrtGate, on tiny causal LMs from ``transformers`` (GraniteConfig dense,
GraniteMoeConfig for MoE) trained on the bytes of the standard library's docstrings.

Every learning rate below is a grid point of a log₂ sweep; η* is the vertex of a parabola
in log₂ η through the best point and its neighbours (:func:`neurips26.optim.optimal_lr`).
Methods: HyperP (:class:`~neurips26.optim.HyperballMuon` on the hidden matrices, Depth-μP
residual branches 1/√(2L)), ``torch.optim.Muon`` (``adjust_lr_fn="match_rms_adamw"``,
WD 0.1), μP-AdamW (``mup``'s ``MuAdamW`` + ``set_base_shapes``, readout 1/width_mult
through Granite's ``logits_scaling``) and SP-AdamW (``torch.optim.AdamW``, WD 0.1). In
HyperP and Muon the embeddings, the LM head and the norms go to AdamW at a fixed lr (not
swept), the same for both.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from ..moe import aux_load_balance_loss, apply_sqrt_gate, collect_router_outputs, expert_load
from ..optim import HyperballMuon, HyperPScaler, InstabilityMonitor, apply_hyperp, fit_power_law, optimal_lr
from ._common import pyplot, stdlib_text
from ._harness import RunContext

SIZES = {
    True: dict(widths=[32, 128], depths=[2, 8], budgets=[1, 4], steps=60, seq=32, batch=8, eval_batches=4,
               ks=[1, 2, 4], aux=[1e-3, 1e-2, 1e-1], moe_width=32, moe_ffn=64, bootstrap=300),
    False: dict(widths=[64, 128, 256, 512], depths=[2, 4, 8, 16], budgets=[1, 2, 4, 8], steps=1000, seq=64,
                batch=32, eval_batches=16, ks=[1, 2, 4, 8], aux=[1e-3, 1e-2, 1e-1], moe_width=128, moe_ffn=256,
                bootstrap=2000),
}
# log2 lr grids (5 points each), centred by a pilot run at the base size
GRIDS = {"hyperp": [-7, -6, -5, -4, -3], "muon": [-9, -8, -7, -6, -5], "mup-adamw": [-10, -9, -8, -7, -6],
         "sp-adamw": [-10, -9, -8, -7, -6]}
METHODS = ("hyperp", "muon", "mup-adamw", "sp-adamw")
ADAM_LR = 2 ** -7  # embeddings / head / norms under HyperP and Muon (not swept)
BASE_WIDTH, BASE_DEPTH, HEAD_DIM, VOCAB = 32, 2, 16, 128
WD_ETAS = [float(e) for e in np.logspace(-4, -1, 7)]
# where run_training trains: scripts/hyperp_gpu.py sets "cuda" and bfloat16 autocast (tasks then run in its process)
DEVICE = "cpu"
AUTOCAST_BF16 = False


@dataclass(frozen=True)
class Run:
    """One training run: ``method`` at ``lr`` on a (width, depth) model for ``steps`` steps.
    ``depth_mup``: HyperP's residual branches 1/√(2L) and lr·√(L₀/L) (``lr`` is then the base
    lr); ``experts_k`` > 0: a GraniteMoe model with k active of 4k experts (constant active
    parameters), ``gate`` "softmax" or "sqrt", auxiliary loss weight ``aux``. ``seed`` fixes
    the initialization and the batches (the same for every lr of a sweep)."""

    method: str
    width: int
    depth: int
    lr: float
    steps: int
    seq: int
    batch: int
    eval_batches: int
    seed: int
    depth_mup: bool = True
    experts_k: int = 0
    moe_ffn: int = 0
    gate: str = "softmax"
    aux: float = 0.0


@functools.lru_cache(maxsize=1)
def _data():
    data = torch.tensor(list(stdlib_text()), dtype=torch.long).clamp(max=VOCAB - 1)
    cut = int(0.9 * data.numel())
    return data[:cut], data[cut:]


def _batch(data, seq, batch, gen):
    starts = torch.randint(0, data.numel() - seq - 1, (batch,), generator=gen)
    return torch.stack([data[s:s + seq + 1] for s in starts.tolist()])


def _config(r: Run):
    import transformers as T

    common = dict(vocab_size=VOCAB, hidden_size=r.width, num_hidden_layers=r.depth,
                  num_attention_heads=r.width // HEAD_DIM, num_key_value_heads=r.width // HEAD_DIM,
                  max_position_embeddings=r.seq, attention_multiplier=HEAD_DIM ** -0.5,
                  tie_word_embeddings=False)
    if r.experts_k:
        cfg = T.GraniteMoeConfig(intermediate_size=r.moe_ffn // r.experts_k, num_local_experts=4 * r.experts_k,
                                 num_experts_per_tok=r.experts_k, **common)
        cls = T.GraniteMoeForCausalLM
    else:
        cfg = T.GraniteConfig(intermediate_size=2 * r.width, **common)
        cls = T.GraniteForCausalLM
    if r.method == "hyperp" and r.depth_mup:
        cfg = apply_hyperp(cfg, HyperPScaler(BASE_WIDTH, BASE_DEPTH, 1.0, 1.0))
    return cfg, cls


def _model(r: Run):
    cfg, cls = _config(r)
    torch.manual_seed(r.seed)
    model = cls(cfg)
    if r.method == "mup-adamw":
        import mup

        def readout(m):  # mup's readout (output / width_mult) in place of the plain LM head
            head = mup.MuReadout(m.config.hidden_size, VOCAB, bias=False)
            with torch.no_grad():
                head.weight.copy_(m.lm_head.weight)
            m.lm_head = head
            return m

        base = readout(cls(_config(Run(**{**r.__dict__, "width": BASE_WIDTH}))[0]))
        delta = readout(cls(_config(Run(**{**r.__dict__, "width": 2 * BASE_WIDTH}))[0]))
        mup.set_base_shapes(readout(model), base, delta=delta)
    return model


def _hidden_matrices(model):
    """The matrices inside the decoder blocks (not the embeddings, head or norms)."""
    head, emb = model.get_output_embeddings().weight, model.get_input_embeddings().weight
    return [p for p in model.parameters() if p.ndim == 2 and p is not head and p is not emb]


def _optimizers(r: Run, model):
    lr = r.lr * (math.sqrt(BASE_DEPTH / r.depth) if r.method == "hyperp" and r.depth_mup else 1.0)
    if r.method == "hyperp":
        hidden = _hidden_matrices(model)
        ids = {id(p) for p in hidden}
        rest = [p for p in model.parameters() if id(p) not in ids]
        # MoE experts are (E, ·, ·) tensors: one sphere per expert matrix is not this optimizer's
        # job, so they go with the rest to AdamW (in the MoE runs the routers and attention
        # matrices are on the sphere)
        return [HyperballMuon([{"params": hidden, "use_hyperball": True},
                               {"params": rest, "use_hyperball": False, "lr": ADAM_LR}], lr=lr,
                              ns_dtype=torch.float32 if DEVICE == "cpu" else torch.bfloat16)]  # bf16 is slow on CPUs
    if r.method == "muon":
        hidden = _hidden_matrices(model)
        ids = {id(p) for p in hidden}
        rest = [p for p in model.parameters() if id(p) not in ids]
        return [torch.optim.Muon(hidden, lr=lr, weight_decay=0.1, adjust_lr_fn="match_rms_adamw"),
                torch.optim.AdamW(rest, lr=ADAM_LR, weight_decay=0.1, betas=(0.9, 0.95))]
    if r.method == "mup-adamw":
        from mup import MuAdamW

        return [MuAdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.95))]
    return [torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.95))]


def _schedule(step, total):
    """Linear warm-up over 5% of the steps, then cosine decay to 10%."""
    warm = max(1, total // 20)
    if step < warm:
        return (step + 1) / warm
    return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def _evaluate(model, val, monitor=False):
    """Per-batch validation losses (and the instability indicators, measured on the first batch)."""
    model.eval()
    with torch.no_grad():
        if monitor:
            with InstabilityMonitor(model) as mon:
                model(val[0][:, :-1])
        with torch.autocast(val[0].device.type, torch.bfloat16, enabled=AUTOCAST_BF16):
            losses = [float(torch.nn.functional.cross_entropy(model(b[:, :-1]).logits.float().flatten(0, 1),
                                                              b[:, 1:].flatten())) for b in val]
    model.train()
    return (losses, mon.summary()) if monitor else losses


def run_training(r: Run) -> dict:
    """Train one :class:`Run`: ``{"val": per-batch final validation losses, "loss": their mean,
    "curve": [[step, loss]], "indicators": {...}, "moe_rms": [...], "load": max/mean}``
    (a task of ``RunContext.map``)."""
    train, val_data = _data()
    dev = torch.device(DEVICE)
    gen = torch.Generator().manual_seed(r.seed)
    vgen = torch.Generator().manual_seed(10_000 + r.seed)
    val = [_batch(val_data, r.seq, r.batch, vgen).to(dev) for _ in range(r.eval_batches)]
    model = _model(r).to(dev)
    gate = apply_sqrt_gate(model) if r.experts_k and r.gate == "sqrt" else None
    opts = _optimizers(r, model)
    base_lrs = [[g["lr"] for g in o.param_groups] for o in opts]
    curve, every = [], max(1, r.steps // 10)
    diverged = False
    for step in range(r.steps):
        f = _schedule(step, r.steps)
        for o, lrs in zip(opts, base_lrs):
            for g, lr0 in zip(o.param_groups, lrs):
                g["lr"] = lr0 * f
        b = _batch(train, r.seq, r.batch, gen).to(dev)
        with torch.autocast(dev.type, torch.bfloat16, enabled=AUTOCAST_BF16):
            if r.experts_k:
                with collect_router_outputs(model) as routes:
                    logits = model(b[:, :-1]).logits
            else:
                logits = model(b[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), b[:, 1:].flatten())
            if r.experts_k and r.aux:
                loss = loss + r.aux * aux_load_balance_loss(routes["logits"], r.experts_k)
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss.backward()
        try:
            for o in opts:
                o.step()
        except FloatingPointError:  # HyperballMuon refuses non-finite gradients
            diverged = True
            break
        if (step + 1) % every == 0 or step == 0:  # the loss curve on two held-out batches (no sync in between)
            curve.append([step + 1, float(np.mean(_evaluate(model, val[:2])))])
            if not math.isfinite(curve[-1][1]):
                diverged = True
                break
    out = {"diverged": diverged, "curve": curve}
    if diverged or not math.isfinite(curve[-1][1] if curve else float("nan")):
        out.update(diverged=True, val=[float("inf")] * r.eval_batches, loss=float("inf"))
        return _jsonable(out)
    out["val"], out["indicators"] = _evaluate(model, val, monitor=True)
    out["loss"] = float(np.mean(out["val"]))
    if not math.isfinite(out["loss"]):
        out.update(diverged=True, loss=float("inf"))
        return _jsonable(out)
    model.eval()
    if r.experts_k:
        rms = []
        handles = [layer.block_sparse_moe.register_forward_hook(
            lambda m, a, o: rms.append(float(o.float().pow(2).mean().sqrt()))) for layer in model.model.layers]
        with torch.no_grad(), collect_router_outputs(model) as routes:
            for b in val:
                model(b[:, :-1])
        for h in handles:
            h.remove()
        out["moe_rms"] = float(np.mean(rms))
        out["load"] = float(np.mean([expert_load(i, 4 * r.experts_k) for i in routes["indices"]]))
    if gate is not None:
        gate.remove()
    return _jsonable(out)


def _jsonable(out):
    """inf (a diverged run) as a large finite number: results travel as JSON."""
    def fix(v):
        if isinstance(v, float) and not math.isfinite(v):
            return 1e9
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        return v
    return fix(out)


@dataclass(frozen=True)
class WDCheck:
    """The weight-decay order check: one step from the same point and gradient with and
    without decoupled decay, for every lr of ``etas`` (float64)."""

    seed: int
    width: int
    seq: int
    batch: int


def run_wd_check(c: WDCheck) -> dict:
    """``{"hyperp": deviations, "muon": deviations}``: ‖W_λ − W_0‖ over the hidden matrices
    after one step at each lr of ``WD_ETAS`` (λ = 0.1), HyperP on the sphere and
    ``torch.optim.Muon``."""
    train, _ = _data()
    r = Run("hyperp", c.width, BASE_DEPTH, 0.0, 1, c.seq, c.batch, 1, c.seed)
    b = _batch(train, c.seq, c.batch, torch.Generator().manual_seed(c.seed))
    out = {}
    for method in ("hyperp", "muon"):
        devs = []
        for eta in WD_ETAS:
            ends = []
            for wd in (0.1, 0.0):
                model = _model(r).double()
                hidden = _hidden_matrices(model)
                logits = model(b[:, :-1]).logits
                torch.nn.functional.cross_entropy(logits.flatten(0, 1), b[:, 1:].flatten()).backward()
                opt = (HyperballMuon(hidden, lr=eta, weight_decay=wd, ns_dtype=None) if method == "hyperp"
                       else torch.optim.Muon(hidden, lr=eta, weight_decay=wd, adjust_lr_fn="match_rms_adamw"))
                opt.step()
                ends.append(torch.cat([p.detach().reshape(-1) for p in hidden]))
            devs.append(float((ends[0] - ends[1]).norm()))
        out[method] = devs
    return out


def _slope(x, y):
    return float(np.polyfit(np.log(x), np.log(np.maximum(y, 1e-300)), 1)[0])


def run(ctx: RunContext) -> None:
    size = SIZES[ctx.quick]
    ctx.config.update(size, grids={m: [2.0 ** e for e in g] for m, g in GRIDS.items()}, adam_lr=ADAM_LR,
                      base_width=BASE_WIDTH, base_depth=BASE_DEPTH, head_dim=HEAD_DIM, vocab=VOCAB)
    S, seq, batch, nb = size["steps"], size["seq"], size["batch"], size["eval_batches"]
    seed = ctx.seed
    lrs = {m: [2.0 ** e for e in g] for m, g in GRIDS.items()}

    def dense(method, width, depth, lr, steps=S, depth_mup=True):
        return Run(method, width, depth, lr, steps, seq, batch, nb, seed, depth_mup)

    # phase 1: the dense sweeps (width, depth, tokens), one task per (config, lr)
    width_tasks = {(m, w): [dense(m, w, BASE_DEPTH, lr) for lr in lrs[m]] for m in METHODS for w in size["widths"]}
    depth_tasks = {(d, mu): [dense("hyperp", BASE_WIDTH, d, lr, depth_mup=mu) for lr in lrs["hyperp"]]
                   for d in size["depths"] for mu in (True, False)}
    token_tasks = {t: [dense("hyperp", BASE_WIDTH, BASE_DEPTH, lr, steps=S * t) for lr in lrs["hyperp"]]
                   for t in size["budgets"]}
    groups = [("width", width_tasks), ("depth", depth_tasks), ("tokens", token_tasks)]
    flat = [t for _, g in groups for ts in g.values() for t in ts]
    results = dict(zip(flat, ctx.map(run_training, flat, description="LR sweeps (width, depth, tokens)")))
    wd = ctx.map(run_wd_check, [WDCheck(seed, BASE_WIDTH, seq, batch)], description="weight-decay order")[0]

    def sweep(tasks):
        return [results[t] for t in tasks]

    eta = {("width",) + k: optimal_lr(lrs[k[0]], [r["loss"] for r in sweep(v)]) for k, v in width_tasks.items()}
    eta.update({("depth",) + k: optimal_lr(lrs["hyperp"], [r["loss"] for r in sweep(v)]) for k, v in depth_tasks.items()})
    eta.update({("tokens", t): optimal_lr(lrs["hyperp"], [r["loss"] for r in sweep(v)]) for t, v in token_tasks.items()})
    # an optimum on the grid's edge is a cap (the true eta* may lie beyond): claims on it are not tested
    keyed = {**{("width",) + k: v for k, v in width_tasks.items()}, **{("depth",) + k: v for k, v in depth_tasks.items()},
             **{("tokens", t): v for t, v in token_tasks.items()}}
    edge = {k: int(np.argmin([r["loss"] for r in sweep(v)])) in (0, len(v) - 1) for k, v in keyed.items()}

    # phase 2: MoE runs at the lr tuned at the base (grid point), SqrtGate vs softmax
    def best_grid(method):
        losses = [r["loss"] for r in sweep(width_tasks[(method, BASE_WIDTH)])]
        return lrs[method][int(np.argmin(losses))]

    base_lr = {m: best_grid(m) for m in ("hyperp", "muon")}

    def moe(method, k, gate, aux=0.0):
        return Run(method, size["moe_width"], BASE_DEPTH, base_lr[method], S, seq, batch, nb, seed, True, k,
                   size["moe_ffn"], gate, aux)

    gran = {(k, g): moe("hyperp", k, g) for k in size["ks"] for g in ("sqrt", "softmax")}
    auxr = {(m, a): moe(m, 2, "sqrt", a) for m in ("hyperp", "muon") for a in size["aux"]}
    moe_flat = list(gran.values()) + list(auxr.values())
    moe_res = dict(zip(moe_flat, ctx.map(run_training, moe_flat, description="MoE runs (granularity, aux loss)")))
    _record(ctx, size, lrs, width_tasks, depth_tasks, token_tasks, results, eta, edge, wd, gran, auxr, moe_res,
            base_lr)


def _gamma_ci(size, lrs, token_tasks, results, seed):
    """γ from η* per budget, with a bootstrap over the validation batches (the same resample
    for every lr of a budget)."""
    budgets = size["budgets"]
    T = np.array(budgets, float)
    vals = {t: np.array([results[r]["val"] for r in token_tasks[t]]) for t in budgets}  # (lrs, batches)
    point = fit_power_law(T, [optimal_lr(lrs["hyperp"], vals[t].mean(1)) for t in budgets], n_boot=0)["gamma"]
    rng = np.random.default_rng(seed)
    nb = next(iter(vals.values())).shape[1]
    gammas = []
    for _ in range(size["bootstrap"]):
        idx = rng.integers(0, nb, nb)
        stars = [optimal_lr(lrs["hyperp"], vals[t][:, idx].mean(1)) for t in budgets]
        gammas.append(fit_power_law(T, stars, n_boot=0)["gamma"])
    lo, hi = np.quantile(gammas, [0.025, 0.975])
    return point, [float(lo), float(hi)]


def _steps_to_reach(curve, target):
    for step, loss in curve:
        if loss <= target:
            return step
    return None


def _record(ctx, size, lrs, width_tasks, depth_tasks, token_tasks, results, eta, edge, wd, gran, auxr, moe_res,
            base_lr):
    widths, depths, budgets = size["widths"], size["depths"], size["budgets"]
    lo_w, hi_w = widths[0], widths[-1]
    for (kind, *k), v in eta.items():
        ctx.metric(f"eta_star/{kind}/" + "/".join(str(x) for x in k), v)
    ctx.metric("eta_star_on_grid_edge", {"/".join(str(x) for x in k): int(v) for k, v in edge.items()})
    for (m, w), ts in width_tasks.items():
        ctx.metric(f"sweep/width/{m}/{w}", [results[t]["loss"] for t in ts])
    for (d, mu), ts in depth_tasks.items():
        ctx.metric(f"sweep/depth/{'depth-mup' if mu else 'no-depth-mup'}/{d}", [results[t]["loss"] for t in ts])
    for t, ts in token_tasks.items():
        ctx.metric(f"sweep/tokens/{t}", [results[x]["loss"] for x in ts])

    # (1) weight decay order
    s_h, s_m = _slope(WD_ETAS, wd["hyperp"]), _slope(WD_ETAS, wd["muon"])
    ctx.metric("wd_deviation", {"etas": WD_ETAS, **wd, "slope_hyperp": s_h, "slope_muon": s_m})
    ctx.claim("Weight decay is a first-order no-op on the Frobenius sphere: the one-step deviation it causes "
              "scales as eta^2 (log-log slope 2 +- 0.2) under HyperP, as eta (slope 1) under Muon (baseline column)",
              ours=s_h, baseline=s_m, holds=bool(abs(s_h - 2) <= 0.2 and abs(s_m - 1) <= 0.2))

    # (2) width transfer
    shift = {m: abs(math.log2(eta[("width", m, hi_w)] / eta[("width", m, lo_w)])) for m in METHODS}
    w_edge = edge[("width", "hyperp", lo_w)] or edge[("width", "hyperp", hi_w)]
    ctx.metric("width_shift_log2", shift)
    ctx.claim(f"Width transfer: |log2 eta* shift| between widths {lo_w} and {hi_w} <= 0.5 under HyperP "
              f"(baseline column: Muon; muP-AdamW {shift['mup-adamw']:.2f}, SP-AdamW {shift['sp-adamw']:.2f})"
              + (" -- not tested: HyperP's best lr lies on the grid's edge" if w_edge else ""),
              ours=shift["hyperp"], baseline=shift["muon"], holds=None if w_edge else bool(shift["hyperp"] <= 0.5))

    # (3) depth transfer
    d0, d1 = depths[0], depths[-1]
    ds = {mu: abs(math.log2(eta[("depth", d1, mu)] / eta[("depth", d0, mu)])) for mu in (True, False)}
    d_edge = any(edge[("depth", d, mu)] for d in (d0, d1) for mu in (True, False))
    ctx.metric("depth_shift_log2", {"depth-mup": ds[True], "no-depth-mup": ds[False]})
    ctx.claim(f"Depth-muP is needed: with it the base-lr eta* shift between depths {d0} and {d1} is <= 0.5 and "
              "smaller than without (baseline column)" + (" -- not tested: a best lr lies on the grid's edge"
                                                          if d_edge else ""), ours=ds[True], baseline=ds[False],
              holds=None if d_edge else bool(ds[True] <= 0.5 and ds[True] < ds[False]))

    # (4) token exponent
    gamma, ci = _gamma_ci(size, lrs, token_tasks, results, ctx.seed)
    t_edge = any(edge[("tokens", t)] for t in budgets)
    ctx.metric("gamma", {"gamma": gamma, "ci": ci, "budgets_steps": [b * size["steps"] for b in budgets],
                         "eta_star": [eta[("tokens", t)] for t in budgets]})
    ctx.claim(f"eta* ~ T^-gamma with gamma = 0.32 inside the 95% bootstrap CI of the fitted gamma "
              f"(CI [{ci[0]:.2f}, {ci[1]:.2f}] over validation batches; {len(budgets)} budgets)"
              + (" -- not tested: a best lr lies on the grid's edge" if t_edge else ""),
              ours=gamma, baseline=0.32, holds=None if t_edge else bool(ci[0] <= 0.32 <= ci[1]))

    # (5) compute efficiency at the largest width: HyperP at the lr transferred from the base width
    hp_lr, = [lr for lr in lrs["hyperp"] if lr == base_lr["hyperp"]]
    hp_run = results[width_tasks[("hyperp", hi_w)][lrs["hyperp"].index(hp_lr)]]
    mu_runs = [results[t] for t in width_tasks[("muon", hi_w)]]
    mu_best = min(mu_runs, key=lambda r: r["loss"])
    target = mu_best["curve"][-1][1]
    reach = _steps_to_reach(hp_run["curve"], target)
    speedup = (mu_best["curve"][-1][0] / reach) if reach else 0.0
    ctx.metric("compute_efficiency", {"hyperp_lr": hp_lr, "muon_final": target, "muon_steps": mu_best["curve"][-1][0],
                                      "hyperp_steps_to_reach": reach or 0,  # 0: never within the run
                                      "speedup": speedup, "hyperp_final": hp_run["curve"][-1][1]})
    ctx.claim(f"HyperP with the base lr transferred reaches tuned Muon's final loss at width {hi_w} in fewer steps "
              "(ours: Muon's steps / HyperP's steps, 0 = never; baseline: 1; paper 1.58x at 6e21 FLOPs)",
              ours=speedup, baseline=1.0, holds=bool(speedup > 1.0))

    # (6) indicators bounded across scale (HyperP at the transferred lr)
    lo_run = results[width_tasks[("hyperp", lo_w)][lrs["hyperp"].index(hp_lr)]]
    ind_lo, ind_hi = lo_run.get("indicators", {}), hp_run.get("indicators", {})
    ratios = {k: ind_hi[k] / max(ind_lo[k], 1e-4 if k == "outlier_share" else 1e-12) for k in ind_lo if k in ind_hi}
    mu_lo = results[width_tasks[("muon", lo_w)][int(np.argmin([results[t]["loss"] for t in width_tasks[("muon", lo_w)]]))]]
    mu_ratios = {k: mu_best.get("indicators", {}).get(k, float("nan")) / max(mu_lo.get("indicators", {}).get(k, 1.0), 1e-4 if k == "outlier_share" else 1e-12) for k in ind_lo}
    ctx.metric("indicators", {"hyperp": {str(lo_w): ind_lo, str(hi_w): ind_hi}, "ratio_hyperp": ratios,
                              "muon": {str(lo_w): mu_lo.get("indicators"), str(hi_w): mu_best.get("indicators")},
                              "ratio_muon": mu_ratios,
                              "curves": {str(w): results[width_tasks[("hyperp", w)][lrs["hyperp"].index(hp_lr)]]["curve"]
                                         for w in widths}})
    worst = max(ratios.values()) if ratios else float("nan")
    mu_worst = max(v for v in mu_ratios.values() if math.isfinite(v)) if mu_ratios else float("nan")
    ctx.claim(f"Every instability indicator (block RMS, 5-sigma outlier share, LM-head and attention Z) at width "
              f"{hi_w} is <= 1.1x its width-{lo_w} value under HyperP (ours: the worst ratio; baseline: Muon's)",
              ours=worst, baseline=mu_worst, holds=bool(worst <= 1.1) if ratios else None)

    # (7) SqrtGate across granularity
    ks = size["ks"]
    rms = {g: [moe_res[gran[(k, g)]].get("moe_rms", float("nan")) for k in ks] for g in ("sqrt", "softmax")}
    flat_sqrt = max(rms["sqrt"]) / min(rms["sqrt"])
    fall_soft = rms["softmax"][-1] / rms["softmax"][0]
    ctx.metric("sqrt_gate", {"ks": ks, "moe_rms": rms, "loss": {g: [moe_res[gran[(k, g)]]["loss"] for k in ks]
                                                              for g in ("sqrt", "softmax")},
                             "sqrt_max_over_min": flat_sqrt, "softmax_last_over_first": fall_soft})
    ctx.claim(f"SqrtGate keeps the MoE block output RMS flat across granularity k in {ks} (max/min <= 1.1, trained "
              f"models) while softmax gates' RMS falls (baseline column: softmax RMS at k={ks[-1]} over k={ks[0]})",
              ours=flat_sqrt, baseline=fall_soft, holds=bool(flat_sqrt <= 1.1 and fall_soft < 1.0))

    # (8) large auxiliary loss weights
    aux = size["aux"]
    table = {m: {str(a): {"loss": moe_res[auxr[(m, a)]]["loss"], "load": moe_res[auxr[(m, a)]].get("load")}
                 for a in aux} for m in ("hyperp", "muon")}
    ctx.metric("aux_loss", table)

    def cost(m):
        return table[m][str(aux[-1])]["loss"] / table[m][str(aux[0])]["loss"] - 1

    ctx.claim(f"Under HyperP the aux-loss weight {aux[-1]} costs <= 1% loss against {aux[0]} with max/mean expert "
              f"load <= 1.2 (ours: the relative loss cost; baseline: Muon's; HyperP load "
              f"{table['hyperp'][str(aux[-1])]['load']:.2f}, Muon {table['muon'][str(aux[-1])]['load']:.2f})",
              ours=cost("hyperp"), baseline=cost("muon"),
              holds=bool(cost("hyperp") <= 0.01 and table["hyperp"][str(aux[-1])]["load"] <= 1.2))

    _tables(ctx, size, lrs, eta, shift, ds, gamma, ci, table, rms)
    _figures(ctx, size, lrs, width_tasks, depth_tasks, token_tasks, results, eta, wd, rms)


def _tables(ctx, size, lrs, eta, shift, ds, gamma, ci, table, rms):
    widths = size["widths"]
    ctx.text(
        f"Tiny Granite LMs (head dim {HEAD_DIM}, MLP 2x width, untied head) on the bytes of the standard library's "
        f"docstrings, {size['steps']} steps of {size['batch']}x{size['seq']} tokens (warm-up 5%, cosine to 10%), "
        f"held-out loss over {size['eval_batches']} batches. LR sweeps on a log2 grid of 5 points per method; "
        f"eta* is the parabola vertex in log2 eta. Under HyperP and Muon the embeddings, head and norms use AdamW "
        f"at {ADAM_LR:g}. The token exponent's CI is a bootstrap over validation batches.")
    ctx.table("eta* per width (log2 shift from the smallest to the largest width)",
              ["method"] + [f"width {w}" for w in widths] + ["|shift| log2"],
              [(m, *[eta[("width", m, w)] for w in widths], shift[m]) for m in METHODS])
    ctx.table("HyperP eta* per depth (base lr under Depth-muP)", ["variant"] + [f"depth {d}" for d in size["depths"]]
              + ["|shift| log2"],
              [("Depth-muP" if mu else "no Depth-muP", *[eta[("depth", d, mu)] for d in size["depths"]], ds[mu])
               for mu in (True, False)])
    ctx.table("HyperP eta* per token budget", ["budget (x base)", "steps", "eta*"],
              [(t, t * size["steps"], eta[("tokens", t)]) for t in size["budgets"]]
              + [("gamma", f"CI [{ci[0]:.2f}, {ci[1]:.2f}]", gamma)])
    ctx.table("MoE block output RMS per granularity k (trained)", ["gate"] + [f"k={k}" for k in size["ks"]],
              [(g, *rms[g]) for g in ("sqrt", "softmax")])
    ctx.table("Auxiliary load-balancing weight (k=2 of 8 experts, SqrtGate)", ["optimizer", "aux weight", "loss",
                                                                                "max/mean load"],
              [(m, a, v["loss"], v["load"]) for m, row in table.items() for a, v in row.items()])


def _figures(ctx, size, lrs, width_tasks, depth_tasks, token_tasks, results, eta, wd, rms):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(METHODS), figsize=(4 * len(METHODS), 3.4), sharey=True)
    for ax, m in zip(axes, METHODS):
        for w in size["widths"]:
            ax.plot(lrs[m], [min(results[t]["loss"], 10) for t in width_tasks[(m, w)]], marker="o", label=f"width {w}")
            ax.axvline(eta[("width", m, w)], ls=":", color=ax.lines[-1].get_color())
        ax.set_xscale("log", base=2)
        ax.set_title(m)
        ax.set_xlabel("lr")
    axes[0].set_ylabel("validation loss")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(fig, "lr_sweep_width", "LR sweeps per width (dotted: fitted eta*).")
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    for mu, ls in ((True, "-"), (False, "--")):
        for d in size["depths"]:
            axes[0].plot(lrs["hyperp"], [min(results[t]["loss"], 10) for t in depth_tasks[(d, mu)]], ls=ls, marker="o",
                         label=f"L={d}{' Depth-muP' if mu else ''}")
    axes[0].set_xscale("log", base=2)
    axes[0].set_title("HyperP, depth")
    axes[0].legend(fontsize=7)
    for t in size["budgets"]:
        axes[1].plot(lrs["hyperp"], [min(results[x]["loss"], 10) for x in token_tasks[t]], marker="o", label=f"x{t} tokens")
    axes[1].set_xscale("log", base=2)
    axes[1].set_title("HyperP, token budget")
    axes[1].legend(fontsize=7)
    axes[2].loglog(WD_ETAS, wd["hyperp"], marker="o", label="HyperP")
    axes[2].loglog(WD_ETAS, wd["muon"], marker="s", label="Muon")
    axes[2].set_xlabel("lr")
    axes[2].set_title("one-step deviation from WD")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(fig, "depth_tokens_wd", "Depth and token-budget sweeps under HyperP; weight decay's one-step effect.")
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    hp_lr = lrs["hyperp"][int(np.argmin([results[t]["loss"] for t in width_tasks[("hyperp", BASE_WIDTH)]]))]
    for w in size["widths"]:
        c = np.array(results[width_tasks[("hyperp", w)][lrs["hyperp"].index(hp_lr)]]["curve"])
        axes[0].plot(c[:, 0], c[:, 1], label=f"HyperP width {w}")
        cm = np.array(min((results[t] for t in width_tasks[("muon", w)]), key=lambda r: r["loss"])["curve"])
        axes[0].plot(cm[:, 0], cm[:, 1], ls="--", label=f"Muon (tuned) width {w}")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("validation loss")
    axes[0].legend(fontsize=7)
    for g in ("sqrt", "softmax"):
        axes[1].plot(size["ks"], rms[g], marker="o", label=g)
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel("active experts k (of 4k)")
    axes[1].set_ylabel("MoE block output RMS")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(fig, "curves_sqrt_gate", "Loss curves at the transferred lr; SqrtGate vs softmax RMS across granularity.")
    plt.close(fig)
