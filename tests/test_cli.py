import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from neurips26.cli import main


def test_unknown_slug_lists_known(fake_registry, tmp_path, capsys):
    assert main(["run", "nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown experiment 'nope'" in err and "fake-ok" in err


def test_unwritable_out_fails_before_work(fake_registry, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["run", "fake-ok", "--out", str(blocker / "sub")]) == 2
    assert "not writable" in capsys.readouterr().err


def test_run_all_reports_failure_and_runs_the_rest(fake_registry, tmp_path, capsys):
    assert main(["run", "all", "--quick", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "fake-boom failed" in err and "deliberate failure" in err
    assert (tmp_path / "fake-ok" / "results.json").exists()


def test_report_renders_self_contained_html(fake_registry, tmp_path, capsys):
    assert main(["report", "--out", str(tmp_path)]) == 2  # nothing to report yet
    assert main(["run", "fake-ok", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["report", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fake-ok" in out and "1 / 1" in out
    page = (tmp_path / "index.html").read_text()
    assert "data:image/png;base64," in page and "x is below 2" in page
    assert "http://" not in page and "https://" not in page
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.json").write_text("{")
    assert main(["report", "--out", str(tmp_path)]) == 2


def test_console_script_list():
    exe = Path(sys.executable).parent / "neurips26"
    proc = subprocess.run([str(exe), "list"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "pome" in proc.stdout


def test_pome_command(tmp_path, capsys):
    pre = {"l.up_proj.weight": torch.randn(8, 6), "l.q.weight": torch.randn(6, 6)}
    ft = {k: v + 0.1 * torch.randn_like(v) for k, v in pre.items()}
    save_file(pre, tmp_path / "pre.safetensors")
    save_file(ft, tmp_path / "ft.safetensors")
    args = [str(tmp_path / "pre.safetensors"), str(tmp_path / "ft.safetensors"), "-o", str(tmp_path / "o.safetensors")]
    assert main(["pome", *args, "--rank", "2"]) == 0
    out = load_file(tmp_path / "o.safetensors")
    assert torch.equal(out["l.q.weight"], ft["l.q.weight"])
    assert torch.linalg.matrix_rank(out["l.up_proj.weight"] - pre["l.up_proj.weight"]) == 2
    assert main(["pome", *args]) == 2  # exists
    assert "overwrite" in capsys.readouterr().err
    assert main(["pome", *args, "--overwrite", "--targets", "re:^l\\.q\\."]) == 0
    assert main(["pome", *args, "--overwrite", "--scale", "huge"]) == 2
    assert main(["pome", *args, "--overwrite", "--targets", "re:(unclosed"]) == 2
    assert main(["pome", *args, "--overwrite", "--targets", "*nothing*"]) == 2
    assert "no tensor matched" in capsys.readouterr().err


def test_pome_command_on_sharded_hf_folders_loads_back_in_transformers(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from neurips26.compression import pome_delta

    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    torch.manual_seed(0)
    pre = LlamaForCausalLM(cfg)
    ft = LlamaForCausalLM(cfg)
    ft.load_state_dict({k: v + 0.01 * torch.randn_like(v) for k, v in pre.state_dict().items()})
    pre.save_pretrained(tmp_path / "pre", max_shard_size="20KB")  # several shards with an index
    ft.save_pretrained(tmp_path / "ft", max_shard_size="30KB")
    assert (tmp_path / "ft" / "model.safetensors.index.json").exists()
    assert main(["pome", str(tmp_path / "pre"), str(tmp_path / "ft"), "-o", str(tmp_path / "out"), "--rank", "4"]) == 0
    edited = LlamaForCausalLM.from_pretrained(tmp_path / "out").state_dict()
    p, f = pre.state_dict(), ft.state_dict()
    for name, w in edited.items():
        if name.endswith("up_proj.weight"):
            torch.testing.assert_close(w, p[name] + pome_delta(f[name] - p[name], rank=4), atol=1e-6, rtol=0)
        else:
            assert torch.equal(w, f[name]), name


def test_sigterm_mid_pome_is_handled_like_ctrl_c(tmp_path, monkeypatch, capsys):
    import os
    import signal

    from neurips26 import compression

    pre = {f"l{i}.up_proj.weight": torch.randn(8, 6) for i in range(4)}
    ft = {k: v + 0.1 * torch.randn_like(v) for k, v in pre.items()}
    save_file(pre, tmp_path / "pre.safetensors")
    save_file(ft, tmp_path / "ft.safetensors")
    out = tmp_path / "out"
    out.mkdir()
    (out / "o.safetensors").write_bytes(b"the earlier output")
    real = compression.pome_checkpoint

    def killed_after_the_first_tensor(*args, callback, **kwargs):
        def cb(*info):
            callback(*info)
            os.kill(os.getpid(), signal.SIGTERM)

        return real(*args, callback=cb, **kwargs)

    monkeypatch.setattr(compression, "pome_checkpoint", killed_after_the_first_tensor)
    previous = signal.getsignal(signal.SIGTERM)
    args = [str(tmp_path / "pre.safetensors"), str(tmp_path / "ft.safetensors"), "-o", str(out / "o.safetensors")]
    assert main(["pome", *args, "--overwrite"]) == 143
    assert "interrupted (SIGTERM)" in capsys.readouterr().err
    assert os.listdir(out) == ["o.safetensors"]  # no temporary file left
    assert (out / "o.safetensors").read_bytes() == b"the earlier output"
    assert signal.getsignal(signal.SIGTERM) == previous  # the handler is given back
