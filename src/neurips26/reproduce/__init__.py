"""Reproductions: one module per paper, each a thin experiment over the library.

The registry maps a slug to an :class:`Experiment`; modules are imported only when
their experiment runs.
"""

from __future__ import annotations

from ._harness import Experiment, RunContext, run_experiment

__all__ = ["EXPERIMENTS", "Experiment", "RunContext", "get", "register", "run_experiment"]

EXPERIMENTS: dict[str, Experiment] = {}


def register(exp: Experiment) -> Experiment:
    if exp.slug in EXPERIMENTS:
        raise ValueError(f"experiment {exp.slug!r} is already registered")
    if exp.slug == "all" or not exp.slug.replace("-", "").isalnum():
        raise ValueError(f"invalid slug {exp.slug!r}: use lowercase letters, digits and '-', not 'all'")
    EXPERIMENTS[exp.slug] = exp
    return exp


def get(slug: str) -> Experiment:
    try:
        return EXPERIMENTS[slug]
    except KeyError:
        known = ", ".join(sorted(EXPERIMENTS)) or "(none)"
        raise KeyError(f"unknown experiment {slug!r}; known: {known}") from None


register(
    Experiment(
        slug="pome",
        paper="POME: Post-Optimization Model Edit via Muon-style Projection",
        summary="Equalize and truncate the fine-tuning delta's spectrum; accuracy vs fine-tuned, truncation, DARE, extrapolation.",
        target="neurips26.reproduce.pome:run",
    )
)
register(
    Experiment(
        slug="doco-compressed-ftrl",
        paper="Decentralized online convex optimization with compressed communication: FTRL-type algorithms",
        summary="Compressed D-FTRL (full information and bandit) vs compressed D-OGD and uncompressed D-FTRL/D-OGD: regret vs T and vs bits.",
        target="neurips26.reproduce.doco_compressed_ftrl:run",
    )
)
register(
    Experiment(
        slug="rennala-nsgd",
        paper="Non-Euclidean minibatch SGD and Rennala-NSGD (semi-asynchronous normalized SGD)",
        summary="Rennala-NSGD (l2, linf, spectral) vs synchronous NSGD, asynchronous SGD and Rennala SGD in simulated wall-clock time; time to eps vs workers and dimension.",
        target="neurips26.reproduce.rennala_nsgd:run",
    )
)
register(
    Experiment(
        slug="quadruple-optimizers",
        paper="Optimizers as closed-loop controlled dynamical systems: the (M, g, Φ, η) quadruple and the NAIM family",
        summary="SGD-momentum, AdamW, Lion, Shampoo and three new quadruple instances, tuned per task: quadratic and Rosenbrock diagnostics (contraction, Lyapunov), digits MLP, a char transformer on stdlib docstrings.",
        target="neurips26.reproduce.quadruple_optimizers:run",
    )
)
register(
    Experiment(
        slug="rlns",
        paper="RLNS: regularized large neighborhood search as an MCMC sampler, with Fenchel-Young losses",
        summary="Exactness of entropic RLNS (stationarity, TV distance); learning k-subset and type-D GAP costs with RLNS-FY vs PyEPO's perturbed FY with an exact solver vs two-stage; MILP vs RLNS scaling.",
        target="neurips26.reproduce.rlns:run",
    )
)
register(
    Experiment(
        slug="moe-mxfp4",
        paper="Quantizing MoE models to MXFP4: limited routing replay QAT and load-aware low-rank compensation",
        summary="Tiny Mixtral / Qwen3-MoE / DeepSeek-V3 pretrained on stdlib docstrings: perplexity and routing agreement for BF16, MXFP4 RTN, uniform and load-aware compensation, QAT with and without replay.",
        target="neurips26.reproduce.moe_mxfp4:run",
    )
)
register(
    Experiment(
        slug="randomized-kb",
        paper="Randomized kriging believer for (asynchronous) parallel Bayesian optimization",
        summary="Randomized KB vs plain KB, constant liar, local penalization, BUCB, batch TS, qLogNEI and random on GP-prior draws, Hartmann-6 and Ackley-10; Q in {1, 4, 8}, synchronous and asynchronous.",
        target="neurips26.reproduce.randomized_kb:run",
    )
)
register(
    Experiment(
        slug="gpucb-stopping",
        paper="GP-UCB with tighter instantaneous regret bounds and provable (eps, delta) stopping",
        summary="The (eps, delta) rule with the tighter bound vs the classical bound, the UCB-LCB gap rule, an EI threshold and a fixed budget on GP-prior draws, Branin, Hartmann-6, Ackley-4 and an SVM-on-digits HPO table.",
        target="neurips26.reproduce.gpucb_stopping:run",
    )
)
register(
    Experiment(
        slug="lsbo-marginalized-kernel",
        paper="Latent-space Bayesian optimization with a marginalized quadratic kernel and geometry-aware sampling",
        summary="LSBO through small VAEs (SELFIES molecules from rdkit's NCI set; planar robot arms): marginalized quadratic vs RBF-on-means vs expected-RBF kernels, TuRBO box vs geometry-aware candidates, RBF bandwidth sweep.",
        target="neurips26.reproduce.lsbo_marginalized_kernel:run",
    )
)
register(
    Experiment(
        slug="dag-flow",
        paper="DAG-flow: exact regularization-path following for continuous DAG learning",
        summary="DAG-flow (DAGMA formulation) vs grid search with the dagma package over the same lambda range on ER2/SF2 linear-Gaussian SEMs and Sachs: SHD/TPR/FDR, compute, bootstrap stability.",
        target="neurips26.reproduce.dag_flow:run",
    )
)
register(
    Experiment(
        slug="embedding-norms",
        paper="Norms of contrastive embeddings: an optimization-dynamics formula, and norms as free calibration",
        summary="InfoNCE tables (SGD, Adam): norms vs the formula, frequency, tree depth, label noise; all-MiniLM-L6-v2 norms of WordNet nouns vs depth/frequency; retrieval confidence with and without norms (AUROC, ECE).",
        target="neurips26.reproduce.embedding_norms:run",
    )
)
register(
    Experiment(
        slug="auc-corrective-power",
        paper="Corrective Power: when pairwise AUC-surrogate training stops correcting severe ranking errors",
        summary="Exact O(n log n) pairwise surrogates (squared hinge, hinge, logistic, exponential) vs CE, focal, CE warm-up and LibAUC's AUCM+PESG on imbalanced digits, breast cancer, make_classification and WordNet glosses (MiniLM LoRA vs scratch); degeneracy index and corrective power during training.",
        target="neurips26.reproduce.auc_corrective_power:run",
    )
)
register(
    Experiment(
        slug="adasgda",
        paper="AdaSGDA / AdaSGDA-VR: orthogonalized, parameter-free single-loop minimax optimization",
        summary="AdaSGDA and AdaSGDA-VR vs SGDA, Adam-GDA, TiAda, NeAda-AdaGrad, AdaGO-GDA and Muon-GDA on a closed-form NC-SC game (deterministic, noisy: eta0 robustness, rates, (eta_x, eta_y) map) and penalty DRO on digits, same gradient budget.",
        target="neurips26.reproduce.adasgda:run",
    )
)
register(
    Experiment(
        slug="quantum-heavy-tail",
        paper="Quantum heavy-tailed stochastic optimization: quantum mean estimation, unbiased MLMC, QNSGD and QPSGD",
        summary="Simulated query counts (no hardware): error-vs-queries slopes of the quantum heavy-tailed estimator vs median-of-means and the sample mean (p in {1.5, 2}, d in {1, 4}); QNSGD vs minibatch NSGD queries to eps-stationarity.",
        target="neurips26.reproduce.quantum_heavy_tail:run",
    )
)
register(
    Experiment(
        slug="paretom3",
        paper="ParetoM³: preference-guided multi-objective optimization over the weak Pareto set",
        summary="ParetoM3 vs EPO, PMTL, PNG, linear scalarization, MGDA (torchjd) and NSGA-II (pymoo): convex quadratics with a known preferred point, ZDT1/ZDT2/Fonseca-Fleming rays, two-digit overlay classification, cost per iteration in m.",
        target="neurips26.reproduce.paretom3:run",
    )
)
register(
    Experiment(
        slug="pace",
        paper="PACE: Partial-state Amortized Constraint Editing for neural combinatorial optimization",
        summary="Learned edit ranker (GNN, listwise imitation of LKH-3 / PyVRP / CHILS) on feasible partial states with closure and budgeted refinement, vs a random ranker and elkai (LKH-3), PyVRP, OR-Tools routing, CHILS and CP-SAT: TSP-50, ATSP-50 (tmat), CVRP-50, MIS and MVC on RB-[200-300] graphs; gap against budget B in {1, 4, 16, 64}.",
        target="neurips26.reproduce.pace:run",
    )
)
register(
    Experiment(
        slug="polestar",
        paper="Polestar: drift-guided sparse KV refresh and token commit for masked-diffusion LMs",
        summary="A small CPU-trained bidirectional Llama dLLM (LLaDA SFT, generated exact-match tasks): LLaDA low-confidence, Fast-dLLM threshold/factor + dual cache, Polestar-Cache, Polestar-Commit and both, swept over their knobs: accuracy vs tokens/forward and positions x layers recomputed.",
        target="neurips26.reproduce.polestar:run",
    )
)
register(
    Experiment(
        slug="riemannian-bilevel",
        paper="Riemannian bilevel optimization with a PL lower level: spectral-clipped tangent hypergradients",
        summary="Spectral-clipped tangent hypergradients vs rhgd's Hessian inverse, CG (lambda = 0, 0.01), Neumann and unrolled AD on rank-deficient least-squares lower levels: Stiefel (EEG-like covariances), Grassmann (diabetes, degree-2 features); residuals, gradient mapping, MSE vs batch, O(1/T).",
        target="neurips26.reproduce.riemannian_bilevel:run",
    )
)
register(
    Experiment(
        slug="hyperp",
        paper="HyperP: hypersphere parameterization with Muon, learning-rate transfer and SqrtGate",
        summary="Tiny Granite LMs on stdlib docstrings: HyperP (Muon on the Frobenius sphere, Depth-muP) vs torch Muon, muP-AdamW (mup) and SP-AdamW; eta* across width, depth, tokens (gamma with CI), WD order, instability indicators, SqrtGate RMS across MoE granularity, aux-loss weights.",
        target="neurips26.reproduce.hyperp:run",
    )
)
