"""Every ```python block of the README and of docs/*.md runs as written, in a fresh interpreter, in an
empty directory. A block that cannot run here (it needs a GPU, say) is preceded by an HTML comment
`<!-- no-test: why -->`, which the reader does not see and this test reports as a skip with its reason."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"(?:<!--\s*no-test:\s*(?P<why>.*?)\s*-->\s*\n)?^```python[^\n]*\n(?P<code>.*?)^```", re.S | re.M)


def _blocks():
    for page in PAGES:
        for i, m in enumerate(FENCE.finditer(page.read_text())):
            line = page.read_text()[: m.start("code")].count("\n") + 1
            yield pytest.param(m["code"], m["why"], id=f"{page.relative_to(ROOT)}:{line}")


BLOCKS = list(_blocks())


def test_the_pages_have_runnable_examples():
    # a regex that silently matches nothing would make every test below vacuous
    assert len(BLOCKS) >= 10, [b.id for b in BLOCKS]


@pytest.mark.parametrize("code, why", BLOCKS)
def test_code_block_runs(code, why, tmp_path):
    if why:
        pytest.skip(why)
    script = tmp_path / "block.py"
    script.write_text(code)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"the block failed:\n{code}\n--- output ---\n{(proc.stdout + proc.stderr)[-3000:]}"
