"""The HTML report: summary with the three verdicts, figures first with their captions, the recorded
tables, config and environment as tables, raw metrics folded and flattened, failed and stopped runs
listed, one self-contained file whose links all land."""

import base64
import json
import re
from html.parser import HTMLParser

import pytest

from neurips26.reproduce import report
from neurips26.reproduce._harness import run_experiment


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.hrefs, self.imgs, self.order = set(), [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "img":
            self.imgs.append(a)
        self.order.append(tag)


def _parse(path):
    page = _Page()
    page.feed(path.read_text())
    return page


def test_a_finished_run_reads_figures_first_then_claims_tables_config_env_and_folded_metrics(fake_registry, tmp_path):
    run_experiment(fake_registry["fake-ok"], tmp_path, seed=0)
    text = report.render_index(tmp_path).read_text()
    section = text[text.index("<section id='fake-ok'>"):]
    # figures before the claims, the claims before the experiment's own tables, config, env, raw metrics
    order = [section.index(s) for s in ("<figure>", "<h3>Claims</h3>", "<h3>numbers</h3>", "<h3>Configuration</h3>",
                                        "<summary>Environment</summary>", "<summary>Raw metrics")]
    assert order == sorted(order)
    assert "<figcaption>a line</figcaption>" in section  # the caption the experiment gave, not the file name
    assert "<code>n</code></td><td class='num'>3</td>" in section  # config as a key / value table
    assert "<code>curve</code></td><td class=''>[1, 0.5, 0.25]</td>" in section.replace("[1.0", "[1")
    assert "<code>torch_threads</code>" in section  # the environment flattened, not a JSON blob
    page = _parse(tmp_path / "index.html")
    for img in page.imgs:
        assert img["src"].startswith("data:image/png;base64,")
        assert base64.b64decode(img["src"].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert all(h[1:] in page.ids for h in page.hrefs if h.startswith("#")) and "#fake-ok" in page.hrefs
    assert "http://" not in text and "https://" not in text  # no network assets


def test_the_summary_counts_each_verdict(fake_registry, tmp_path):
    run_experiment(fake_registry["fake-ok"], tmp_path, seed=0)
    path = tmp_path / "fake-ok" / "results.json"
    data = json.loads(path.read_text())
    claim = data["claims"][0]
    data["claims"] = [claim, {**claim, "holds": False}, {**claim, "holds": False}, {**claim, "holds": None}]
    path.write_text(json.dumps(data))
    text = report.render_index(tmp_path).read_text()
    badges = re.findall(r"<span class='badge ([\w-]+)'>(\d+)</span>", text)
    assert badges == [("b-yes", "1"), ("b-no", "2"), ("b-untested", "1")]
    assert text.count("<td class='untested'>not tested</td>") == 1


def test_failed_and_stopped_runs_are_listed_as_such(fake_registry, tmp_path):
    with pytest.raises(RuntimeError, match="deliberate failure"):
        run_experiment(fake_registry["fake-boom"], tmp_path, seed=0)
    assert (tmp_path / "fake-boom.error.txt").read_text().startswith("failed")
    run_experiment(fake_registry["fake-ok"], tmp_path, seed=0)
    text = report.render_index(tmp_path).read_text()
    assert "<section id='fake-boom'>" in text and "deliberate failure" in text
    assert re.search(r"fake-boom</a></td><td></td><td></td><td><span class='failed'>failed", text)
    # a run stopped with Ctrl-C after an earlier success keeps its results and says its last attempt stopped
    (tmp_path / "fake-ok.error.txt").write_text("stopped at 2026-12-05\n\nKeyboardInterrupt\n")
    assert "last attempt stopped" in report.render_index(tmp_path).read_text()
    # the next finished run clears the mark
    run_experiment(fake_registry["fake-ok"], tmp_path, seed=0)
    assert not (tmp_path / "fake-ok.error.txt").exists()
    assert "last attempt" not in report.render_index(tmp_path).read_text()


def test_flatten_gives_dotted_keys_and_summarizes_long_curves():
    rows = dict(report.flatten({"a": {"b": 1, "c": [1.0, 2.0]}, "runs": [{"x": 1}, {"x": 2}], "curve": list(range(100))}))
    assert rows["a.b"] == 1 and rows["a.c"] == [1.0, 2.0] and rows["runs[1].x"] == 2
    assert report._fmt(rows["curve"]).startswith("100 values: 0, 1, …, 99 (min 0, max 99)")
