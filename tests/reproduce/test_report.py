"""The HTML report: summary with the four verdicts, figures first with their captions, the recorded
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


def _badges(text):
    return re.findall(r"<span class='badge b-([\w-]+)( zero)?' title='(\d+) ([^']+)'[^>]*>(\d+)</span>", text)


def test_the_summary_counts_each_verdict(fake_registry, tmp_path):
    run_experiment(fake_registry["fake-ok"], tmp_path, seed=0)
    path = tmp_path / "fake-ok" / "results.json"
    data = json.loads(path.read_text())
    claim = data["claims"][0]
    data["claims"] = [claim, {**claim, "holds": False}, {**claim, "holds": False}, {**claim, "holds": None}]
    path.write_text(json.dumps(data))
    text = report.render_index(tmp_path).read_text()
    assert [(kind, bool(zero), int(n)) for kind, zero, n, _, shown in _badges(text)] == [
        ("yes", False, 1), ("no", False, 2), ("inconclusive", True, 0), ("untested", False, 1)]
    assert all(n == shown for _, _, n, _, shown in _badges(text))
    assert text.count("<td class='untested' data-label='verdict'>not tested</td>") == 1


def test_inconclusive_and_unknown_verdicts_get_their_own_badge_and_colour(fake_registry, tmp_path, monkeypatch):
    """The report reads verdict()'s strings: 'inconclusive' has its colour and count, and a verdict it
    does not know is shown as it is and counted apart, never dropped or merged into another."""
    run_experiment(fake_registry["fake-ok"], tmp_path, seed=0)
    path = tmp_path / "fake-ok" / "results.json"
    data = json.loads(path.read_text())
    claim = data["claims"][0]
    data["claims"] = [{**claim, "tag": t} for t in ("holds", "inconclusive", "inconclusive", "surprising")]
    path.write_text(json.dumps(data))
    monkeypatch.setattr(report, "verdict", lambda c: c["tag"])
    text = report.render_index(tmp_path).read_text()
    assert [(kind, int(n), word) for kind, _, n, word, _ in _badges(text)] == [
        ("yes", 1, "held"), ("no", 0, "not held"), ("inconclusive", 2, "inconclusive"), ("untested", 0, "not tested"),
        ("other", 1, "surprising")]
    assert text.count("<td class='inconclusive' data-label='verdict'>inconclusive</td>") == 2
    assert "<td class='other' data-label='verdict'>surprising</td>" in text
    assert ".b-inconclusive{background:var(--inconclusive)}" in text and "--inconclusive:#" in text


def test_a_claim_decided_over_seeds_shows_its_difference_and_interval(fake_registry, tmp_path):
    run_experiment(fake_registry["fake-ok"], tmp_path, seed=0)
    path = tmp_path / "fake-ok" / "results.json"
    data = json.loads(path.read_text())
    data["claims"][0].update(diff=0.5, ci=[0.25, 0.75], level=0.95, n=3, n_capped=1)
    path.write_text(json.dumps(data))
    text = report.render_index(tmp_path).read_text()
    assert "<span class='ci'>+0.5, 95% CI [0.25, 0.75], 3 seeds, 1 capped left out</span></td>" in text


def test_failed_and_stopped_runs_are_listed_as_such(fake_registry, tmp_path):
    with pytest.raises(RuntimeError, match="deliberate failure"):
        run_experiment(fake_registry["fake-boom"], tmp_path, seed=0)
    assert (tmp_path / "fake-boom.error.txt").read_text().startswith("failed")
    run_experiment(fake_registry["fake-ok"], tmp_path, seed=0)
    text = report.render_index(tmp_path).read_text()
    assert "<section id='fake-boom'>" in text and "deliberate failure" in text
    assert re.search(r"fake-boom</a><span class='paper'>Paper fake-boom</span></td><td[^>]*>none recorded</td>"
                     r"<td data-label='status'><span class='failed'>failed", text)
    # a run stopped with Ctrl-C after an earlier success keeps its results and says its last attempt stopped
    (tmp_path / "fake-ok.error.txt").write_text("stopped at 2026-12-05\n\nKeyboardInterrupt\n")
    text = report.render_index(tmp_path).read_text()
    assert "last attempt stopped" in text and "The last attempt stopped</span>; the results below" in text
    assert "<summary>fake-ok.error.txt</summary><pre>stopped at 2026-12-05" in text
    # the next finished run clears the mark
    run_experiment(fake_registry["fake-ok"], tmp_path, seed=0)
    assert not (tmp_path / "fake-ok.error.txt").exists()
    assert "last attempt" not in report.render_index(tmp_path).read_text()


def test_flatten_gives_dotted_keys_and_summarizes_long_curves():
    rows = dict(report.flatten({"a": {"b": 1, "c": [1.0, 2.0]}, "runs": [{"x": 1}, {"x": 2}], "curve": list(range(100))}))
    assert rows["a.b"] == 1 and rows["a.c"] == [1.0, 2.0] and rows["runs[1].x"] == 2
    assert report._fmt(rows["curve"]).startswith("100 values: 0, 1, …, 99 (min 0, max 99)")
