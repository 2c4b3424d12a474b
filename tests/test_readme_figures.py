"""The README's status table and the pages' reference quick runs are backed by the committed results.

Every row of the table quotes a claim of results/quick/SLUG.json (ours vs the best baseline, its verdict) and
that run's tally; scripts/update_readme.py writes the table from those files. These tests check that the
README is exactly what the script writes from the committed results, that every registered experiment has a
row, a page and a committed reference run, and, independently of the script, that every number in a row's
headline and claims cells is one of that reference run's claim numbers."""

import importlib.util
import json
import pathlib
import re
import sys

import pytest

from neurips26.reproduce import EXPERIMENTS
from neurips26.reproduce._harness import tally

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADER = "| paper | status | use it | headline (quick run): ours vs best baseline | claims held / tested | page |"


def _script():
    spec = importlib.util.spec_from_file_location("update_readme", ROOT / "scripts" / "update_readme.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _rows() -> list[list[str]]:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines.count(HEADER) == 1, "the README has exactly one status table with the agreed header"
    start = lines.index(HEADER) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _slug(page_cell: str) -> str:
    m = re.fullmatch(r"\[([a-z0-9-]+)\]\(docs/([a-z0-9-]+)\.md\)", page_cell)
    assert m and m[1] == m[2], f"page cell {page_cell!r} must be [SLUG](docs/SLUG.md)"
    return m[1]


def test_the_readme_and_the_pages_are_what_the_script_writes_from_the_committed_results():
    stale = [str(path.relative_to(ROOT)) for path, (old, new) in _script().outputs().items() if old != new]
    assert not stale, f"{stale} are stale: run `python scripts/update_readme.py`"


def test_every_experiment_has_a_row_a_page_and_a_committed_reference_run():
    slugs = [_slug(row[-1]) for row in _rows()]
    assert len(slugs) == len(set(slugs)) == 19
    assert set(EXPERIMENTS) <= set(slugs), f"experiments without a row: {set(EXPERIMENTS) - set(slugs)}"
    for slug in slugs:
        assert (ROOT / "docs" / f"{slug}.md").is_file(), f"docs/{slug}.md is missing"
        assert (ROOT / "results" / "quick" / f"{slug}.json").is_file(), f"results/quick/{slug}.json is missing"


def _numbers_of(results: dict) -> list[float]:
    """Our and the baseline's number of every claim: the headline quotes one claim."""
    out = []

    def walk(v):
        if isinstance(v, bool):
            return
        if isinstance(v, (int, float)):
            out.append(float(v))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk([[c["ours"], c["baseline"]] for c in results["claims"]])
    return out


def _matches(text: str, values: list[float]) -> bool:
    """The decimal `text` is one of `values` rounded to its printed digits (as a fraction or in percent)."""
    shown = float(text)
    digits = len(text.split(".")[1]) if "." in text else 0
    tol = 0.5 * 10.0 ** -digits + 1e-12
    return any(abs(v - shown) <= tol or abs(100 * v - shown) <= tol for v in values)


@pytest.mark.parametrize("row", _rows(), ids=lambda row: _slug(row[-1]))
def test_every_figure_of_a_row_is_in_its_committed_results(row):
    slug = _slug(row[-1])
    results = json.loads((ROOT / "results" / "quick" / f"{slug}.json").read_text())
    held, tested = tally(results["claims"])
    assert row[4] == f"{held} / {tested}", f"{slug}: claims cell {row[4]!r}, committed run {held} / {tested}"
    values = _numbers_of(results)
    # the numbers of the headline cell, leaving out those inside names (Q=4, d=10, "Stiefel", "10 λ")
    figures = re.findall(r"(?<![\w=.])-?\d+(?:\.\d+e-?\d+|\.\d+|e-?\d+)(?![\w.])|(?<![\w=.-])-?\d+(?= %| vs|\s*\()",
                         row[3])
    assert figures, f"{slug}: no figure in the headline cell {row[3]!r}"
    for text in figures:
        if "e" in text:
            v = float(text)
            assert any(abs(x - v) <= 5e-3 * abs(v) for x in values), f"{slug}: {text} is not in the results"
        else:
            assert _matches(text, values), f"{slug}: {text} in {row[3]!r} is not in results/quick/{slug}.json"
