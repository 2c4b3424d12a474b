"""The edit ranker: its listwise loss against a direct transcription, permutation equivariance of
the message passing, symmetry of pair edits, learning (top-1 agreement with held-out reference
tours above random), and the cache (atomic write, recipe check)."""

import numpy as np
import pytest
import torch

from neurips26.combinatorial.pace import (ATSPTask, Budget, CVRPTask, EditRanker, Features, MISTask, PaceSolver,
                                          TSPTask, rb_graph, tmat_atsp, train_ranker, training_examples, uniform_cvrp,
                                          uniform_tsp)
from neurips26.combinatorial.pace import pretrained
from neurips26.combinatorial.pace.baselines import ElkaiATSP, ElkaiTSP, PyVRPCVRP
from neurips26.combinatorial.pace.ranker import cache_path, listwise_loss, load_ranker, save_ranker


def test_listwise_loss_is_the_softmax_cross_entropy_over_each_list():
    g = torch.Generator().manual_seed(0)
    sizes = [3, 5, 1, 4]
    scores = torch.randn(sum(sizes), generator=g) * 3
    target = torch.tensor([0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1], dtype=torch.bool)
    seg = torch.repeat_interleave(torch.arange(4), torch.tensor(sizes))
    direct, start = [], 0
    for k in sizes:
        s, t = scores[start:start + k].double(), target[start:start + k]
        p = torch.softmax(s, 0)
        direct.append(-torch.log(p[t].sum()))
        start += k
    got = listwise_loss(scores, seg, target, 4)
    assert float(got) == pytest.approx(float(torch.stack(direct).mean()), rel=1e-5)
    # a single target per list: exactly torch's cross-entropy
    one = torch.zeros_like(target)
    idx = [0, 3, 8, 9]
    one[idx] = True
    ce = [torch.nn.functional.cross_entropy(scores[a:a + k][None], torch.tensor([i - a]))
          for a, k, i in zip([0, 3, 8, 9], sizes, idx)]
    assert float(listwise_loss(scores, seg, one, 4)) == pytest.approx(float(torch.stack(ce).mean()), rel=1e-5)


def _features(task, inst, steps, rng):
    s = task.empty_state(inst)
    for _ in range(steps):
        c = task.candidates(s)
        s = task.transition(s, c[rng.integers(len(c))])
    e = task.candidates(s)
    return s, e, task.features(s, e)


def test_ranker_is_permutation_equivariant_and_pair_symmetric():
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    task = TSPTask()
    _, edits, f = _features(task, task.instance(uniform_tsp(15, rng)), 5, rng)
    model = EditRanker(task.feature_dims, hidden=16, layers=2)
    base = model.scores(f)
    perm = rng.permutation(15)  # new label of old vertex v is perm[v]
    inv = np.argsort(perm)
    g = Features(f.x[inv], perm[f.edge_index], f.edge_attr, perm[f.edits], f.edit_attr)
    assert np.allclose(model.scores(g), base, atol=1e-5)
    flipped = Features(f.x, f.edge_index, f.edge_attr, f.edits[:, ::-1].copy(), f.edit_attr)
    assert np.allclose(model.scores(flipped), base, atol=1e-6)
    assert base.shape == (len(edits),) and np.isfinite(base).all()


@pytest.mark.parametrize("which", ["tsp", "atsp", "cvrp"])
def test_trained_ranker_agrees_with_held_out_reference_solutions_above_chance(which):
    rng = np.random.default_rng(1)
    if which == "tsp":
        task, ref, count = TSPTask(), ElkaiTSP(), 40
        insts = [task.instance(uniform_tsp(20, rng)) for _ in range(count)]
    elif which == "atsp":
        task, ref, count = ATSPTask(), ElkaiATSP(), 40
        insts = [tmat_atsp(20, rng) for _ in range(count)]
    else:
        task, ref, count = CVRPTask(), PyVRPCVRP(time_s=0.1), 24
        insts = [uniform_cvrp(20, rng) for _ in range(count)]
    tours = [ref.solve(i).sol for i in insts]
    cut = count * 3 // 4
    train = [ex for i, t in zip(insts[:cut], tours[:cut]) for ex in training_examples(task, i, t, rng, n_states=8)]
    test = [ex for i, t in zip(insts[cut:], tours[cut:]) for ex in training_examples(task, i, t, rng, n_states=8)]
    model, losses = train_ranker(task, train, epochs=8, hidden=32, layers=2, seed=0)
    assert losses[-1] < 0.8 * losses[0]
    hits = np.mean([ex.target[int(np.argmax(model.scores(ex.features)))] for ex in test])
    chance = np.mean([ex.target.mean() for ex in test])
    assert hits > chance + 0.2, (hits, chance)


def test_training_is_seeded_and_the_cache_round_trips(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    task = MISTask()
    g = rb_graph(rng, "small")
    ref = PaceSolver(task, _Degree()).solve(g, Budget(0, 4, 1), seed=0).sol
    ex = training_examples(task, g, ref, rng, n_states=6)
    a, la = train_ranker(task, ex, epochs=2, hidden=8, layers=1, seed=4)
    b, lb = train_ranker(task, ex, epochs=2, hidden=8, layers=1, seed=4)
    assert la == lb and all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    path = tmp_path / "r.pt"
    save_ranker(a, path, {"recipe": {"x": 1}})
    c, meta = load_ranker(path)
    assert meta == {"recipe": {"x": 1}} and np.array_equal(c.scores(ex[0].features), a.scores(ex[0].features))
    assert [p.name for p in tmp_path.iterdir()] == ["r.pt"]  # no temporary left behind
    with pytest.raises(ValueError, match="empty"):
        train_ranker(task, [], epochs=1)
    with pytest.raises(ValueError, match="epochs"):
        train_ranker(task, ex, epochs=0)


def test_pretrained_ranker_trains_once_then_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    monkeypatch.setitem(pretrained.RECIPES, "tsp", dict(n=12, instances=3, states=4, epochs=1, seed=0))
    m1, meta1 = pretrained.pretrained_ranker("tsp")
    assert pretrained.ranker_path("tsp") == cache_path(f"tsp-v{pretrained.CACHE_VERSION}")
    assert pretrained.ranker_path("tsp").exists() and meta1["n_examples"] > 0
    assert meta1["version"] == pretrained.CACHE_VERSION and meta1["teacher"].startswith("elkai")
    m2, meta2 = pretrained.pretrained_ranker("tsp")
    assert meta2["recipe"] == meta1["recipe"] and all(
        torch.equal(p, q) for p, q in zip(m1.state_dict().values(), m2.state_dict().values()))
    assert pretrained.ranker_name("mvc") == "mis" and pretrained.ranker_name("mcl") == "mis"
    with pytest.raises(ValueError, match="task"):
        pretrained.ranker_name("knapsack")
    with pytest.raises(ValueError, match="epochs"):
        pretrained.pretrained_ranker("tsp", epochs=0)


def test_a_version_1_cache_file_is_not_reused(tmp_path, monkeypatch):
    # the old (time-limited teachers) file name and a file at the new name whose record has no version
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    r = dict(n=12, instances=3, states=4, epochs=1, seed=0)
    monkeypatch.setitem(pretrained.RECIPES, "tsp", r)
    old = EditRanker(TSPTask().feature_dims, hidden=4, layers=1)
    save_ranker(old, tmp_path / "pace-tsp-ranker.pt", {"recipe": r})
    save_ranker(old, pretrained.ranker_path("tsp"), {"recipe": r})
    model, meta = pretrained.pretrained_ranker("tsp")
    assert model.hidden == 32 and meta["version"] == pretrained.CACHE_VERSION


@pytest.mark.parametrize("name", ["tsp", "atsp", "cvrp", "mis", "maxcut"])
def test_teachers_are_deterministic_and_budgeted_by_work(name, monkeypatch):
    # Two teacher runs on the same generated instances give the same solutions, and the run stops by
    # its work budget (iterations / deterministic time), not by a wall clock: a slower or busier
    # machine gets the same training data. Small budgets keep the test fast.
    small = {"cvrp": dict(pyvrp_iterations=60), "mis": dict(ils_rounds=16, cpsat_det_s=0.2),
             "maxcut": dict(cpsat_det_s=0.1)}.get(name, {})
    r = dict(pretrained.RECIPES[name], instances=2, **small)
    monkeypatch.setitem(pretrained.RECIPES, name, r)
    if name in ("tsp", "atsp", "cvrp"):
        r["n"] = 20
    task, ref = pretrained.teacher(name)
    insts = pretrained.training_instances(name, r, np.random.default_rng(0))
    again = pretrained.training_instances(name, r, np.random.default_rng(0))
    first = [ref.solve(i, seed=k + 1) for k, i in enumerate(insts)]
    second = [pretrained.teacher(name)[1].solve(i, seed=k + 1) for k, i in enumerate(again)]
    for a, b, inst in zip(first, second, insts):
        assert task.key(a.sol) == task.key(b.sol) and a.cost == b.cost and a.feasible
    stats = first[0].stats
    if name == "cvrp":
        assert stats["iterations"] == r["pyvrp_iterations"]
    elif name in ("mis", "maxcut"):
        assert r["cpsat_det_s"] <= stats["deterministic_time"] < r["cpsat_det_s"] + 0.1 or stats["optimal"]


def test_clique_cover_covers_every_edge_with_cliques_and_the_ils_cpsat_teacher_is_exact_on_small_graphs():
    import itertools

    import networkx as nx

    from neurips26.combinatorial.pace import Graph, MaxCliqueTask, MVCTask
    from neurips26.combinatorial.pace.baselines import IlsCpSatMIS, clique_cover

    rng = np.random.default_rng(3)
    for _ in range(3):
        g = rb_graph(rng, "small")
        cover = clique_cover(g)
        covered = np.zeros_like(g.A)
        for c in cover:
            assert len(c) >= 2 and all(g.A[a, b] for a, b in itertools.combinations(c.tolist(), 2))
            covered[np.ix_(c, c)] = True
        assert np.array_equal(covered & g.A, g.A)
    # on graphs of 25 vertices the teacher reaches networkx's maximum weight clique of the complement
    for k in range(6):
        G = nx.gnp_random_graph(25, 0.2, seed=k)
        g = Graph.from_networkx(G)
        alpha = nx.max_weight_clique(nx.complement(G), weight=None)[1]
        sol = IlsCpSatMIS(rounds=8, deterministic_s=2.0).solve(g, seed=1)
        assert sol.feasible and int(sol.sol.sum()) == alpha
        cover = IlsCpSatMIS(rounds=8, deterministic_s=2.0, task=MVCTask()).solve(g, seed=1)
        assert cover.feasible and cover.cost == 25 - alpha
        clique = IlsCpSatMIS(rounds=8, deterministic_s=2.0, task=MaxCliqueTask()).solve(G, seed=1)
        assert clique.feasible and -clique.cost == nx.max_weight_clique(G, weight=None)[1]
    with pytest.raises(ValueError, match="deterministic_s"):
        IlsCpSatMIS(deterministic_s=0.0)
    from neurips26.combinatorial.pace.baselines import CpSatMIS, PyVRPCVRP

    with pytest.raises(ValueError, match="workers"):
        CpSatMIS(workers=2, deterministic_s=1.0)
    with pytest.raises(ValueError, match="iterations"):
        PyVRPCVRP(iterations=0)


class _Degree:
    """A hand ranker: prefer low-degree vertices (any object with scores() is a ranker)."""

    def scores(self, f, rng=None):
        return -f.x[f.edits[:, 0], 3].astype(np.float64)
