import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from neurips26._atomic import atomic_open
from neurips26.compression import pome_checkpoint, pome_delta
from neurips26.compression.safetensors_io import SafetensorsFile, StreamingWriter, dtype_code

TENSORS = {
    "a.up_proj.weight": torch.randn(12, 8),
    "b.bf16": torch.randn(3, 5).to(torch.bfloat16),
    "c.int": torch.arange(7, dtype=torch.int64),
    "d.half": torch.randn(2, 2, 2).half(),
    "e.bool": torch.tensor([True, False]),
    "f.empty": torch.empty(0, 4),
}


def test_reader_matches_reference_library(tmp_path):
    path = tmp_path / "x.safetensors"
    save_file(TENSORS, path, metadata={"format": "pt"})
    with SafetensorsFile(path) as f:
        assert f.metadata == {"format": "pt"}
        assert set(f.tensors) == set(TENSORS)
        for name, ref in TENSORS.items():
            assert torch.equal(f.read(name), ref)


def test_streaming_writer_output_loads_in_reference_library(tmp_path):
    path = tmp_path / "y.safetensors"
    with atomic_open(path) as fh:
        w = StreamingWriter(fh, [(n, dtype_code(t.dtype), tuple(t.shape)) for n, t in TENSORS.items()], {"k": "v"})
        for n, t in TENSORS.items():
            w.write(n, t)
        w.close()
    loaded = load_file(path)
    for name, ref in TENSORS.items():
        assert loaded[name].dtype == ref.dtype and torch.equal(loaded[name], ref)


def test_writer_refuses_out_of_order_and_incomplete(tmp_path):
    with open(tmp_path / "z", "wb") as fh:
        w = StreamingWriter(fh, [("a", "F32", (2,)), ("b", "F32", (2,))])
        with pytest.raises(ValueError, match="layout order"):
            w.write("b", torch.zeros(2))
        w.write("a", torch.zeros(2))
        with pytest.raises(ValueError, match="incomplete"):
            w.close()


def test_truncated_file_is_a_clear_error(tmp_path):
    path = tmp_path / "t.safetensors"
    save_file({"w": torch.randn(100)}, path)
    data = path.read_bytes()
    path.write_bytes(data[:-40])
    with pytest.raises(ValueError, match="truncated"):
        SafetensorsFile(path)
    (tmp_path / "junk.safetensors").write_bytes(b"hello world, not a checkpoint")
    with pytest.raises(ValueError, match="not a safetensors file"):
        SafetensorsFile(tmp_path / "junk.safetensors")


def _checkpoints():
    g = torch.Generator().manual_seed(0)
    pre = {
        f"model.layers.{i}.mlp.up_proj.weight": torch.randn(24, 16, generator=g) for i in range(3)
    } | {f"model.layers.{i}.self_attn.q_proj.weight": torch.randn(16, 16, generator=g) for i in range(3)}
    pre["model.embed_tokens.weight"] = torch.randn(50, 16, generator=g).to(torch.bfloat16)
    ft = {k: v + (0.05 * torch.randn(v.shape, generator=g)).to(v.dtype) for k, v in pre.items()}
    return pre, ft


def _expected(pre, ft, **kw):
    out = {}
    for k in ft:
        if "up_proj" in k:
            out[k] = pre[k] + pome_delta(ft[k] - pre[k], **kw)
        else:
            out[k] = ft[k]
    return out


def test_pome_checkpoint_single_file(tmp_path):
    pre, ft = _checkpoints()
    save_file(pre, tmp_path / "pre.safetensors")
    save_file(ft, tmp_path / "ft.safetensors", metadata={"format": "pt"})
    seen = []
    report = pome_checkpoint(
        tmp_path / "pre.safetensors", tmp_path / "ft.safetensors", tmp_path / "out.safetensors",
        rank_ratio=0.25, callback=lambda n, b, e: seen.append((n, e)),
    )
    assert sorted(report.edited) == sorted(k for k in ft if "up_proj" in k)
    assert len(seen) == len(ft)
    out = load_file(tmp_path / "out.safetensors")
    exp = _expected(pre, ft, rank_ratio=0.25)
    for k in ft:
        if k in report.edited:
            torch.testing.assert_close(out[k], exp[k], atol=1e-6, rtol=0)
        else:
            assert torch.equal(out[k], ft[k]) and out[k].dtype == ft[k].dtype  # bit-identical
    with SafetensorsFile(tmp_path / "out.safetensors") as f:
        assert f.metadata == {"format": "pt"}
    # Refuses to clobber an existing output unless asked.
    with pytest.raises(FileExistsError, match="overwrite"):
        pome_checkpoint(tmp_path / "pre.safetensors", tmp_path / "ft.safetensors", tmp_path / "out.safetensors")


def _save_sharded(state, folder, n_shards):
    folder.mkdir()
    names = sorted(state)
    weight_map = {}
    for s in range(n_shards):
        part = names[s::n_shards]
        fname = f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        save_file({k: state[k] for k in part}, folder / fname)
        weight_map.update({k: fname for k in part})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text('{"model_type": "llama"}')


def test_pome_checkpoint_sharded_folders_with_different_sharding(tmp_path):
    pre, ft = _checkpoints()
    _save_sharded(pre, tmp_path / "pre", 2)
    _save_sharded(ft, tmp_path / "ft", 3)
    report = pome_checkpoint(tmp_path / "pre", tmp_path / "ft", tmp_path / "out", rank=3)
    out_dir = tmp_path / "out"
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(p.name for p in (tmp_path / "ft").iterdir())
    assert (out_dir / "config.json").read_bytes() == (tmp_path / "ft" / "config.json").read_bytes()
    exp = _expected(pre, ft, rank=3)
    index = json.loads((out_dir / "model.safetensors.index.json").read_text())["weight_map"]
    for k, fname in index.items():
        got = load_file(out_dir / fname)[k]
        if k in report.edited:
            torch.testing.assert_close(got, exp[k], atol=1e-6, rtol=0)
        else:
            assert torch.equal(got, ft[k])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_pome_checkpoint_errors_before_any_output(tmp_path):
    pre, ft = _checkpoints()
    ft["model.layers.0.mlp.up_proj.weight"] = torch.zeros(24, 15)
    save_file(pre, tmp_path / "pre.safetensors")
    save_file(ft, tmp_path / "ft.safetensors")
    with pytest.raises(ValueError, match="model.layers.0.mlp.up_proj.weight"):
        pome_checkpoint(tmp_path / "pre.safetensors", tmp_path / "ft.safetensors", tmp_path / "out.safetensors")
    assert not (tmp_path / "out.safetensors").exists()
    with pytest.raises(ValueError, match="overwrite input"):
        pome_checkpoint(tmp_path / "pre.safetensors", tmp_path / "ft.safetensors", tmp_path / "ft.safetensors")


def test_pome_checkpoint_takes_apply_pomes_options_and_checks_them_first(tmp_path):
    from neurips26.compression import apply_pome

    pre = {f"l{i}.up_proj.weight": torch.randn(8, 6, generator=torch.Generator().manual_seed(i)) for i in range(2)}
    ft = {k: v + 0.1 * torch.randn(v.shape, generator=torch.Generator().manual_seed(9)) for k, v in pre.items()}
    save_file(pre, tmp_path / "pre.safetensors")
    save_file(ft, tmp_path / "ft.safetensors")
    options = dict(rank=3, scale="spectral", gain=1.5, svd_method="full")
    pome_checkpoint(tmp_path / "pre.safetensors", tmp_path / "ft.safetensors", tmp_path / "out.safetensors", **options)
    expected = apply_pome(pre, ft, **options)
    out = load_file(tmp_path / "out.safetensors")
    assert all(torch.equal(out[k], expected[k]) for k in pre)
    # bad options fail before any file is read: the inputs need not even exist
    with pytest.raises(TypeError, match=r"unknown POME option\(s\) \['rank_ration'\]"):
        pome_checkpoint(tmp_path / "none", tmp_path / "none2", tmp_path / "o.safetensors", rank_ration=0.3)
    for bad, match in ((dict(gain=-1.0), "gain"), (dict(rank_ratio=0.0), "rank_ratio"), (dict(rank=0), "rank"),
                       (dict(scale="nuclear"), "scale"), (dict(svd_method="qr"), "svd_method")):
        with pytest.raises(ValueError, match=match):
            pome_checkpoint(tmp_path / "none", tmp_path / "none2", tmp_path / "o.safetensors", **bad)
