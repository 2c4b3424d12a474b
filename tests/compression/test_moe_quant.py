"""MoE pieces on tiny random-init transformers models (Mixtral, Qwen3-MoE, DeepSeek-V3)."""

import itertools

import pytest
import torch

from neurips26.compression.moe_quant import allocate_ranks, low_rank_compensation, replay_routes, router_margins
from neurips26.moe import find_moe_blocks, record_routes, routing_agreement

from test_moe import ARCHS, tiny  # tests/ is on sys.path (its conftest's folder)


@pytest.mark.parametrize("arch", ARCHS)
def test_replay_restores_the_recorded_routes_after_a_perturbation(arch):
    model = tiny(arch)
    blocks = find_moe_blocks(model)
    ids = torch.randint(0, 64, (4, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), record_routes(blocks) as ref:
        base = model(ids).logits
    with torch.no_grad():  # perturb the first block's experts: later routes move
        blocks[0].experts.down_proj.mul_(-3.0)
        blocks[0].experts.gate_up_proj.add_(torch.randn_like(blocks[0].experts.gate_up_proj))
    with torch.no_grad(), record_routes(blocks) as free:
        model(ids)
    with torch.no_grad(), replay_routes(blocks, ref) as replay, record_routes(blocks) as replayed:
        model(ids)
        replay.rewind()
        replay.layers = {blocks[0].name}  # limited replay: the first block only
        model(ids)
    last = blocks[-1].name
    plain = routing_agreement(ref.indices[last][0], free.indices[last][0])
    full = routing_agreement(ref.indices[last][0], replayed.indices[last][0])
    assert plain["exact"] < 1.0 and full["exact"] == 1.0 and full["jaccard"] >= plain["jaccard"]
    # limited: the first block replayed, the last one routes freely (as without replay)
    assert torch.equal(replayed.indices[blocks[0].name][1], ref.indices[blocks[0].name][0])
    assert torch.equal(replayed.indices[last][1], free.indices[last][0])
    assert base.shape == (4, 12, 64)


def test_margin_condition_keeps_the_top_k_set():
    generator = torch.Generator().manual_seed(2)
    logits = torch.randn(2000, 8, generator=generator)
    k = 2
    m = router_margins(logits, k)
    assert torch.all(m >= 0)
    base = logits.topk(k).indices.sort(-1).values
    for scale in (0.49, 0.2):
        delta = (torch.rand(2000, 8, generator=generator) * 2 - 1) * (scale * m[:, None])  # 2·max|Δ| < m
        moved = (logits + delta).topk(k).indices.sort(-1).values
        assert torch.equal(moved, base)
    # beyond the margin the set can change, and does for some tokens
    delta = torch.zeros_like(logits)
    top = logits.topk(k + 1).indices
    rows = torch.arange(2000)
    delta[rows, top[:, k - 1]] = -0.6 * m
    delta[rows, top[:, k]] = 0.6 * m
    assert not torch.equal((logits + delta).topk(k).indices.sort(-1).values, base)


def brute_force_ranks(svals, loads, budget):
    best, arg = -1.0, None
    for r in itertools.product(*[range(len(s) + 1) for s in svals]):
        if sum(r) != min(budget, sum(len(s) for s in svals)):
            continue
        val = sum(l * float((s[:ri] ** 2).sum()) for l, s, ri in zip(loads, svals, r))
        if val > best + 1e-12:
            best, arg = val, r
    return best, arg


def test_greedy_rank_allocation_is_the_brute_force_optimum():
    generator = torch.Generator().manual_seed(3)
    for _ in range(30):
        svals = [torch.rand(4, generator=generator).sort(descending=True).values for _ in range(3)]
        loads = torch.rand(3, generator=generator).tolist()
        for budget in range(0, 13):
            r = allocate_ranks(svals, loads, budget)
            value = sum(l * float((s[:ri] ** 2).sum()) for l, s, ri in zip(loads, svals, r))
            assert abs(value - brute_force_ranks(svals, loads, budget)[0]) < 1e-9


def test_weighted_error_decreases_and_load_is_respected():
    generator = torch.Generator().manual_seed(4)
    spectrum = torch.rand(6, generator=generator).sort(descending=True).values
    svals = [spectrum, spectrum.clone(), torch.rand(6, generator=generator).sort(descending=True).values]
    loads = [3.0, 1.0, 2.0]
    total = sum(l * float((s**2).sum()) for l, s in zip(loads, svals))
    errors = []
    for budget in range(0, 19):
        r = allocate_ranks(svals, loads, budget)
        assert sum(r) == budget and r[0] >= r[1]  # same spectrum, higher load: never a lower rank
        errors.append(total - sum(l * float((s[:ri] ** 2).sum()) for l, s, ri in zip(loads, svals, r)))
    assert all(b < a for a, b in zip(errors, errors[1:]))  # strictly, as every σ > 0
    with pytest.raises(ValueError, match="descending"):
        allocate_ranks([torch.tensor([1.0, 2.0])], [1.0], 1)


def test_low_rank_compensation_is_the_eckart_young_optimum():
    R = torch.randn(20, 12, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    S = torch.linalg.svdvals(R)
    for r in (0, 1, 5, 12):
        B, A = low_rank_compensation(R, r)
        assert B.shape == (20, r) and A.shape == (r, 12)
        assert abs(float(torch.linalg.norm(R - B @ A) ** 2) - float((S[r:] ** 2).sum())) < 1e-9


def qat(model, batches, steps, replay_log=None, fraction=1.0, lr=1e-2):
    """A few QAT steps on the recorded batches (language-modelling loss)."""
    from neurips26.compression.moe_quant import RouteReplay, prepare_qat, replay_schedule

    adapters = prepare_qat(model, ranks=2)
    opt = torch.optim.Adam(adapters, lr=lr)
    blocks = find_moe_blocks(model)
    replay = RouteReplay(blocks, replay_log) if replay_log is not None else None
    model.train()
    for step in range(steps):
        if replay is not None:
            replay.rewind()
            replay.active = replay_schedule(step, steps, fraction)
        for ids in batches:
            loss = model(ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    if replay is not None:
        replay.remove()
    model.eval()
    return adapters


@pytest.mark.parametrize("arch", ["mixtral", "qwen3"])
def test_qat_trains_only_adapters_keeps_routers_and_replay_agrees_at_least_as_well(arch):
    batches = [torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(s)) for s in range(2)]
    results = {}
    for replay in (False, True):
        model = tiny(arch)
        blocks = find_moe_blocks(model)
        routers = [b.gate.weight.detach().clone() for b in blocks]
        others = {n: p.detach().clone() for n, p in model.named_parameters() if "experts" not in n}
        with torch.no_grad(), record_routes(blocks) as ref:
            for ids in batches:
                model(ids)
        adapters = qat(model, batches, steps=3, replay_log=ref if replay else None)
        # routers bit-identical, every non-expert parameter untouched, only adapters trained
        assert all(torch.equal(b.gate.weight, r) for b, r in zip(blocks, routers))
        for n, p in model.named_parameters():
            if n in others:
                assert torch.equal(p, others[n]) and not p.requires_grad
        trainable = {id(p) for p in model.parameters() if p.requires_grad}
        assert trainable == {id(a) for a in adapters}
        assert any(a.detach().abs().sum().item() > 0 for a in adapters[1::2])  # the B factors moved
        with torch.no_grad(), record_routes(blocks) as after:
            for ids in batches:
                model(ids)
        results[replay] = sum(routing_agreement(ref.indices[b.name][i], after.indices[b.name][i])["jaccard"]
                              for b in blocks for i in range(len(batches)))
    assert results[True] >= results[False]


def test_residual_initialised_adapter_is_the_compensated_weight():
    from neurips26.compression.moe_quant import QuantizedExpertsWithAdapter
    from neurips26.compression.mxfp4 import fake_quantize_mxfp4

    W = torch.randn(3, 16, 64, generator=torch.Generator().manual_seed(6))
    adapter = QuantizedExpertsWithAdapter(W, ranks=[0, 2, 16], init="residual")
    with torch.no_grad():
        out = adapter(W)
    Q = fake_quantize_mxfp4(W)
    assert torch.equal(out[0], Q[0])  # rank 0: the quantized weight itself
    assert torch.allclose(out[2], W[2], atol=1e-5)  # full rank: the residual is restored
    S = torch.linalg.svdvals((W[1] - Q[1]).double())
    assert abs(float(torch.linalg.norm((W[1] - out[1]).double()) ** 2) - float((S[2:] ** 2).sum())) < 1e-6


def test_margin_diagnostic_never_reports_more_flips_than_the_bound_allows():
    from neurips26.compression.moe_quant import margin_diagnostic

    generator = torch.Generator().manual_seed(7)
    ref = torch.randn(5000, 8, generator=generator)
    for scale in (0.01, 0.1, 1.0):
        d = margin_diagnostic(ref, ref + scale * torch.randn(5000, 8, generator=generator), 2)
        assert d["measured_flip"] <= d["predicted_flip"]
        assert d["margin_q10"] <= d["margin_q50"] <= d["margin_q90"]
    assert margin_diagnostic(ref, ref, 2)["measured_flip"] == 0.0


def _reference_distillation(model, teacher, batches, steps, log=None, fraction=1.0, lr=3e-3):
    """The QAT loop as the moe-mxfp4 experiment wrote it before it moved into the library."""
    from neurips26.compression.moe_quant import RouteReplay, replay_schedule

    with torch.no_grad():
        targets = [torch.log_softmax(teacher(ids).logits, dim=-1) for ids in batches]
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    replay = RouteReplay(find_moe_blocks(model), log) if log is not None else None
    model.train()
    for step in range(steps):
        ids = batches[step % len(batches)]
        if replay is not None:
            replay.seek(step % len(batches))
            replay.active = replay_schedule(step, steps, fraction)
        logp = torch.log_softmax(model(ids).logits, dim=-1)
        loss = torch.nn.functional.kl_div(logp, targets[step % len(batches)], log_target=True, reduction="batchmean")
        opt.zero_grad()
        loss.backward()
        opt.step()
    if replay is not None:
        replay.remove()
    model.eval()


@torch.no_grad()
def _kl_to(teacher, student, batches) -> float:
    kl = torch.nn.functional.kl_div
    return sum(float(kl(torch.log_softmax(student(ids).logits, -1), torch.log_softmax(teacher(ids).logits, -1),
                        log_target=True, reduction="batchmean")) for ids in batches)


@pytest.mark.parametrize("arch,fraction", [("mixtral", None), ("qwen3", 0.5), ("deepseek", 1.0)])
def test_distill_adapters_is_the_reference_loop_and_recovers_the_teacher(arch, fraction):
    import copy

    from neurips26.compression.moe_quant import distill_adapters, prepare_qat

    teacher = tiny(arch)
    batches = [torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(s)) for s in range(3)]
    log = None
    if fraction is not None:
        with torch.no_grad(), record_routes(find_moe_blocks(teacher)) as log:
            for ids in batches:
                teacher(ids)
    ours, ref = copy.deepcopy(teacher), copy.deepcopy(teacher)
    adapters = prepare_qat(ours, ranks=2, init="residual")
    prepare_qat(ref, ranks=2, init="residual")
    before = _kl_to(teacher, ours, batches)
    kw = {} if fraction is None else dict(routes=log, replay_fraction=fraction)
    losses = distill_adapters(ours, teacher, batches, 7, lr=1e-2, **kw)
    _reference_distillation(ref, teacher, batches, 7, log=log, fraction=fraction or 1.0, lr=1e-2)
    # bit-identical to the loop it replaced, and nothing but the adapters moved
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), ref.state_dict().values()))
    assert len(losses) == 7 and not ours.training
    for b, b0 in zip(find_moe_blocks(ours), find_moe_blocks(teacher)):
        assert torch.equal(b.gate.weight, b0.gate.weight)
    assert {id(p) for p in ours.parameters() if p.requires_grad} == {id(a) for a in adapters}
    # the student moved towards the teacher (measured without replay)
    assert _kl_to(teacher, ours, batches) < before


def test_distill_adapters_refuses_bad_arguments():
    from neurips26.compression.moe_quant import distill_adapters, prepare_qat

    teacher = tiny("mixtral")
    batches = [torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(0))]
    import copy

    plain = copy.deepcopy(teacher)
    with pytest.raises(ValueError, match="prepare_qat"):
        distill_adapters(plain, teacher, batches, 1)
    student = copy.deepcopy(teacher)
    prepare_qat(student, ranks=1)
    with pytest.raises(ValueError, match="steps"):
        distill_adapters(student, teacher, batches, -1)
    with pytest.raises(ValueError, match="empty"):
        distill_adapters(student, teacher, [], 1)
    with pytest.raises(ValueError, match="lr"):
        distill_adapters(student, teacher, batches, 1, lr=0.0)
    with pytest.raises(ValueError, match="replay_fraction"):
        distill_adapters(student, teacher, batches, 1, replay_fraction=1.5)
    with torch.no_grad(), record_routes(find_moe_blocks(teacher)) as log:
        teacher(batches[0])
    with pytest.raises(ValueError, match="one per batch"):
        distill_adapters(student, teacher, batches * 2, 1, routes=log)


def test_residual_spectra_are_the_residuals_singular_values_keyed_for_prepare_qat():
    from neurips26.compression.moe_quant import prepare_qat, residual_spectra
    from neurips26.compression.mxfp4 import fake_quantize_mxfp4

    model = tiny("qwen3")
    spectra = residual_spectra(model)
    blocks = find_moe_blocks(model)
    assert list(spectra) == [f"{b.name}.{p}" for b in blocks for p in ("gate_up_proj", "down_proj")]
    W = blocks[1].experts.down_proj.detach()
    for e, s in enumerate(spectra[f"{blocks[1].name}.down_proj"]):
        assert s.dtype == torch.float64 and s.shape == (min(W.shape[1:]),)
        assert torch.all(s[1:] <= s[:-1])
        assert torch.allclose(s, torch.linalg.svdvals((W[e] - fake_quantize_mxfp4(W[e])).double()), rtol=0, atol=0)
    # the allocation built on them is what prepare_qat reads
    ranks = {k: allocate_ranks(v, [1.0] * len(v), budget=4) for k, v in spectra.items()}
    prepare_qat(model, ranks=ranks)
    with pytest.raises(ValueError, match="scale_mode"):
        residual_spectra(model, scale_mode="ceil")
