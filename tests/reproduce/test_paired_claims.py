"""Claims decided over seeds: a paired comparison with a Student-t interval, and the four verdicts
(holds, does not hold, inconclusive, not tested), read back by verdict / tally / verdict_counts, rendered
in report.md and printed by the CLI. Old single-run records keep their meaning."""

import json
import math
import textwrap
from dataclasses import asdict

import numpy as np
import pytest
from scipy import stats

from neurips26.reproduce import Experiment, RunContext, run_experiment
from neurips26.reproduce._harness import (VERDICTS, paired_interval, render_markdown, tally, verdict,
                                          verdict_counts, verdict_text)


@pytest.mark.parametrize("n, level, better", [(2, 0.95, "higher"), (3, 0.95, "lower"), (5, 0.9, "higher"),
                                              (12, 0.99, "lower"), (40, 0.5, "higher")])
def test_the_interval_is_scipys_paired_t_interval(n, level, better):
    rng = np.random.default_rng(n)
    for _ in range(5):
        a = rng.normal(1.0, 2.0, n)
        b = a + rng.normal(0.3, 0.5, n)  # paired: a shared per-seed part, and a difference with its own noise
        mean, lo, hi = paired_interval(a, b, better=better, level=level)
        ref = stats.ttest_rel(a, b) if better == "higher" else stats.ttest_rel(b, a)
        ci = ref.confidence_interval(confidence_level=level)
        assert lo == pytest.approx(ci.low, rel=1e-12, abs=1e-12)
        assert hi == pytest.approx(ci.high, rel=1e-12, abs=1e-12)
        assert mean == pytest.approx(np.mean(a - b) if better == "higher" else np.mean(b - a), rel=1e-12, abs=1e-14)


def test_equal_differences_give_an_interval_of_zero_width():
    assert paired_interval([3.0, 4.0, 5.0], [1.0, 2.0, 3.0]) == (2.0, 2.0, 2.0)
    assert paired_interval([3.0, 4.0, 5.0], [1.0, 2.0, 3.0], better="lower") == (-2.0, -2.0, -2.0)
    ctx = RunContext("x", ".")
    assert ctx.compare("shifted by one", [2.0, 3.0, 4.0], [1.0, 2.0, 3.0]) == "holds"
    assert ctx.compare("identical", [2.0, 3.0, 4.0], [2.0, 3.0, 4.0]) == "inconclusive"  # zero is in [0, 0]
    assert ctx.claims[1].ci == [0.0, 0.0]


def _paired(diffs, base=10.0):
    """(ours, baseline) whose paired differences ours - baseline are ``diffs``."""
    baseline = [base + i for i in range(len(diffs))]
    return [b + d for b, d in zip(baseline, diffs)], baseline


def test_verdict_boundaries_interval_against_zero_and_margin():
    ctx = RunContext("x", ".")
    up = [0.9, 1.0, 1.1]  # mean 1, interval about [0.75, 1.25] at 95% (t = 4.30, se = 0.0577)
    _, lo, hi = paired_interval(*_paired(up))
    assert 0.74 < lo < 0.76 and 1.24 < hi < 1.26
    assert ctx.compare("higher is better, all above zero", *_paired(up)) == "holds"
    assert ctx.compare("lower is better: the same numbers favour the baseline", *_paired(up), better="lower") == "does not hold"
    straddle = [-0.5, 0.2, 0.6]  # mean 0.1, wide interval around zero
    assert ctx.compare("interval contains zero", *_paired(straddle)) == "inconclusive"
    assert ctx.compare("interval contains zero, lower", *_paired(straddle), better="lower") == "inconclusive"
    # a margin moves the line the interval is judged against
    assert ctx.compare("beats by more than 0.5", *_paired(up), margin=0.5) == "holds"
    assert ctx.compare("beats by more than 1", *_paired(up), margin=1.0) == "inconclusive"  # 1 is inside [lo, hi]
    assert ctx.compare("beats by more than 2", *_paired(up), margin=2.0) == "does not hold"  # ahead, but by less
    assert ctx.compare("no worse than 2 (lower better)", *_paired(up), better="lower", margin=-2.0) == "holds"
    # exactly on the boundary: an interval that touches the margin is inconclusive
    assert ctx.compare("touches", *_paired([1.0, 1.0, 1.0]), margin=1.0) == "inconclusive"
    # a higher level widens the interval: 0.9 decides, 0.999 does not
    few = [0.2, 0.5, 0.35]  # mean 0.35, se 0.0866: t(0.95, 2) = 2.92 keeps it above zero, t(0.9995, 2) = 31.6 does not
    assert ctx.compare("level 0.9", *_paired(few), level=0.9) == "holds"
    assert ctx.compare("level 0.999", *_paired(few), level=0.999) == "inconclusive"
    assert [c.holds for c in ctx.claims] == [True, False, None, None, True, None, False, True, None, True, None]


def test_the_stored_record_has_means_interval_and_verdict():
    ctx = RunContext("x", ".")
    ours, base = [7.70, 7.72, 7.71], [7.74, 7.75, 7.755]
    ctx.compare("ours has lower perplexity", ours, base, better="lower")
    rec = vars(ctx.claims[0])
    assert rec["ours"] == pytest.approx(np.mean(ours)) and rec["baseline"] == pytest.approx(np.mean(base))
    assert rec["n"] == 3 and rec["n_capped"] == 0 and rec["level"] == 0.95 and rec["better"] == "lower"
    assert rec["diff"] == pytest.approx(np.mean(np.subtract(base, ours)))
    ci = stats.ttest_rel(base, ours).confidence_interval(0.95)
    assert rec["ci"] == pytest.approx([ci.low, ci.high])
    assert rec["verdict"] == "holds" and rec["holds"] is True
    assert rec["ours_seeds"] == ours and rec["baseline_seeds"] == base
    json.dumps(rec, allow_nan=False)  # a results.json record


def test_capped_seeds_are_left_out_and_all_capped_is_not_tested():
    ctx = RunContext("x", ".")
    # gpucb-style: both rules ran into the budget of 25 on two seeds: those pairs say nothing
    v = ctx.compare("stops no later", [25, 25, 12, 14, 11], [25, 25, 20, 21, 19], better="lower",
                    capped=[True, True, False, False, False])
    assert v == "holds"
    rec = vars(ctx.claims[0])
    assert rec["n"] == 3 and rec["n_capped"] == 2
    assert rec["ci"] == pytest.approx(list(stats.ttest_rel([20, 21, 19], [12, 14, 11]).confidence_interval()))
    # the shown means are over the pairs the interval uses; the per-seed lists keep every seed
    assert rec["ours"] == pytest.approx(np.mean([12, 14, 11])) and rec["baseline"] == pytest.approx(20.0)
    assert rec["ours_seeds"] == [25, 25, 12, 14, 11] and rec["baseline_seeds"] == [25, 25, 20, 21, 19]
    assert ctx.compare("all capped", [25, 25, 25], [25, 25, 25], capped=np.array([True, True, True])) == "not tested"
    assert ctx.compare("one left", [25, 25, 3], [25, 25, 5], capped=[True, True, False]) == "not tested"
    last = vars(ctx.claims[-1])
    assert last["holds"] is None and last["ci"] is None and last["diff"] is None and last["n"] == 1
    assert [verdict(vars(c)) for c in ctx.claims] == ["holds", "not tested", "not tested"]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(ours=[1.0], baseline=[2.0]), ValueError, "at least 2 seeds"),
    (dict(ours=[1.0, 2.0], baseline=[1.0, 2.0, 3.0]), ValueError, "one value per seed"),
    (dict(ours=[1.0, float("nan")], baseline=[1.0, 2.0]), ValueError, r"ours\[1\] is nan"),
    (dict(ours=[1.0, 2.0], baseline=[1.0, float("inf")]), ValueError, r"baseline\[1\] is inf"),
    (dict(ours=1.0, baseline=[1.0, 2.0]), TypeError, "sequence of numbers"),
    (dict(ours=["a", "b"], baseline=[1.0, 2.0]), TypeError, "sequence of numbers"),
    (dict(ours=[1.0, 2.0], baseline=[1.0, 3.0], better="smaller"), ValueError, "'higher' or 'lower'"),
    (dict(ours=[1.0, 2.0], baseline=[1.0, 3.0], level=1.0), ValueError, "between 0 and 1"),
    (dict(ours=[1.0, 2.0], baseline=[1.0, 3.0], margin=float("nan")), ValueError, "margin"),
    (dict(ours=[1.0, 2.0], baseline=[1.0, 3.0], capped=[True]), ValueError, "one bool per seed"),
    (dict(ours=[1.0, 2.0], baseline=[1.0, 3.0], capped=[1, 0]), ValueError, "one bool per seed"),
    (dict(ours=[1.0, 2.0], baseline=[1.0, 3.0], capped=[True, True], better="up"), ValueError, "'higher' or 'lower'"),
])
def test_bad_input_is_refused_and_nothing_recorded(kwargs, error, match):
    ctx = RunContext("x", ".")
    with pytest.raises(error, match=match):
        ctx.compare("c", **kwargs)
    assert ctx.claims == []


def test_old_single_run_records_keep_their_verdicts_and_tally():
    old = [{"claim": "a", "ours": 1.0, "baseline": 2.0, "holds": True},
           {"claim": "b", "ours": 3.0, "baseline": 2.0, "holds": False},
           {"claim": "c", "ours": None, "baseline": 2.0, "holds": None}]
    assert [verdict(c) for c in old] == ["holds", "does not hold", "not tested"]
    assert tally(old) == (1, 2)
    assert verdict_counts(old) == {"holds": 1, "does not hold": 1, "inconclusive": 0, "not tested": 1}
    inconclusive = {"claim": "d", "ours": 1.0, "baseline": 1.01, "holds": None, "verdict": "inconclusive",
                    "ci": [-0.1, 0.2], "diff": 0.05, "n": 3, "level": 0.95}
    # an inconclusive claim was tested and did not hold: it counts in tested, not in held
    assert tally(old + [inconclusive]) == (1, 3)
    assert verdict_counts(old + [inconclusive]) == {"holds": 1, "does not hold": 1, "inconclusive": 1, "not tested": 1}
    assert list(verdict_counts([])) == list(VERDICTS)


def test_a_stored_verdict_must_be_known_and_agree_with_holds():
    with pytest.raises(ValueError, match="one of holds, does not hold, inconclusive, not tested"):
        verdict({"claim": "x", "holds": None, "verdict": "fails"})
    with pytest.raises(ValueError, match="contradicts holds=False"):
        verdict({"claim": "x", "holds": False, "verdict": "holds"})
    with pytest.raises(ValueError, match="contradicts holds=True"):
        verdict({"claim": "x", "holds": True, "verdict": "inconclusive"})


def test_render_markdown_shows_each_verdict_with_its_interval():
    ctx = RunContext("x", ".")
    ctx.claim("single run", 1.0, 2.0, holds=True)
    ctx.compare("paired, straddles zero", *_paired([-0.5, 0.2, 0.6]))
    ctx.compare("paired, against", *_paired([-1.0, -1.1, -0.9]))
    ctx.compare("both capped", [5.0, 5.0], [5.0, 5.0], capped=[True, True])
    claims = [vars(c) for c in ctx.claims]
    md = render_markdown({"slug": "x", "paper": "p", "seed": 0, "quick": True, "wall_s": 1.0, "env": {},
                          "claims": claims}, [])
    assert "holds: 1, does not hold: 1, inconclusive: 1, not tested: 1." in md
    assert "| single run | 1 | 2 | holds |" in md
    lo, hi = claims[1]["ci"]
    assert f"| inconclusive (+0.1, 95% CI [{lo:.4g}, {hi:.4g}], n = 3) |" in md
    assert "| **does not hold (-1, 95% CI [" in md
    assert "| not tested (2 of 2 pairs capped on both sides) |" in md


PAIRED_EXPERIMENT = textwrap.dedent('''
    import numpy as np

    def paired(ctx):
        rng = np.random.default_rng(ctx.seed)
        base = rng.normal(5.0, 1.0, 4)
        ctx.metric("base", base.tolist())
        ctx.compare("clearly better", (base + 1.0 + rng.normal(0, 0.01, 4)).tolist(), base.tolist())
        ctx.compare("noise only", (base + rng.normal(0, 1.0, 4) * [1, -1, 1, -1]).tolist(), base.tolist())
        ctx.compare("clearly worse", (base - 1.0).tolist(), base.tolist())
        ctx.compare("budget", [9, 9, 9, 9], [9, 9, 9, 9], better="lower", capped=[True] * 4)
        ctx.claim("old style", 1.0, 2.0, holds=True)
''')


@pytest.fixture
def paired_experiment(tmp_path, monkeypatch):
    from neurips26 import reproduce

    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "paired_fake_experiment.py").write_text(PAIRED_EXPERIMENT)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    exp = Experiment(slug="fake-paired", paper="Paper paired", summary="test", target="paired_fake_experiment:paired")
    monkeypatch.setattr(reproduce, "EXPERIMENTS", {"fake-paired": exp})
    return exp


def test_results_json_carries_the_verdicts_and_the_cli_prints_all_four(paired_experiment, tmp_path, capsys):
    from neurips26.cli import main

    assert main(["run", "fake-paired", "--seed", "3", "--out", str(tmp_path / "runs")]) == 0
    err = capsys.readouterr().err
    data = json.loads((tmp_path / "runs" / "fake-paired" / "results.json").read_text())
    got = [verdict(c) for c in data["claims"]]
    assert got[0] == "holds" and got[2] == "does not hold" and got[3] == "not tested" and got[4] == "holds"
    counts = verdict_counts(data["claims"])
    held, tested = tally(data["claims"])
    assert (held, tested) == (counts["holds"], 5 - counts["not tested"])
    assert data["claims"][4] == {"claim": "old style", "ours": 1.0, "baseline": 2.0, "holds": True}  # unchanged shape
    assert all(math.isfinite(x) for x in data["claims"][0]["ci"])
    summary = (f"{counts['holds']} held, {counts['does not hold']} do not hold, {counts['inconclusive']} inconclusive, "
               f"{counts['not tested']} not tested (of 5 claims)")
    assert summary in " ".join(err.split())
    assert "clearly better: ours" in err and "95% CI" in err
    for v in set(got):
        assert v in err


def test_the_cli_report_table_counts_the_four_verdicts(paired_experiment, tmp_path, capsys, monkeypatch):
    from neurips26.cli import main
    from neurips26.reproduce import report

    run_experiment(paired_experiment, tmp_path, seed=0, quick=True)
    path = tmp_path / "fake-paired" / "results.json"
    data = json.loads(path.read_text())
    data["claims"] = [data["claims"][4], {**data["claims"][4], "holds": False}, data["claims"][3],
                      {"claim": "i1", "ours": 1.0, "baseline": 1.0, "holds": None, "verdict": "inconclusive"},
                      {"claim": "i2", "ours": 1.0, "baseline": 1.0, "holds": None, "verdict": "inconclusive"}]
    path.write_text(json.dumps(data))
    monkeypatch.setattr(report, "render_index", lambda out: out / "index.html")  # the HTML is report.py's test
    assert main(["report", "--out", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "fake-paired" in line]
    assert len(rows) == 1  # the slug whole, on one line of 80 columns
    assert [cell.strip() for cell in rows[0].strip("│ ").split("│")][:3] == ["fake-paired", "1 / 4", "1 / 2 / 1"]


def test_bound_decides_a_figure_against_a_fixed_threshold(tmp_path):
    ctx = RunContext("x", tmp_path)
    # slopes over three seeds, all well under 0.6: the whole interval of the mean is below it
    assert ctx.bound("slope <= 0.6", [0.50, 0.52, 0.51], 0.6) == "holds"
    assert ctx.bound("slope <= 0.4", [0.50, 0.52, 0.51], 0.4) == "does not hold"
    assert ctx.bound("slope <= 0.51", [0.50, 0.52, 0.51], 0.51) == "inconclusive"
    assert ctx.bound("fraction >= 0.95", [0.99, 1.0, 0.98], 0.95, better="higher") == "holds"
    c = ctx.claims[0]
    # the same interval as scipy's one-sample t test of the mean against the threshold
    ref = stats.ttest_1samp([0.50, 0.52, 0.51], 0.6).confidence_interval(0.95)
    assert c.ci == pytest.approx([0.6 - ref.high, 0.6 - ref.low])  # signed to favour ours: threshold - mean
    assert c.baseline == 0.6 and c.method == "one-sample t" and c.n == 3
    with pytest.raises(ValueError, match="threshold"):
        ctx.bound("nan threshold", [0.5, 0.6], float("nan"))
    assert ctx.bound("all capped", [1.0, 1.0], 0.5, capped=[True, True]) == "not tested"


def test_decide_applies_the_rule_to_an_interval_found_elsewhere(tmp_path):
    ctx = RunContext("x", tmp_path)
    kw = dict(ours=0.71, baseline=0.70, n=500, method="paired bootstrap")
    assert ctx.decide("bootstrap, above zero", diff=0.01, ci=[0.002, 0.02], **kw) == "holds"
    assert ctx.decide("bootstrap, straddles", diff=0.01, ci=[-0.01, 0.02], **kw) == "inconclusive"
    assert ctx.decide("bootstrap, below", diff=-0.01, ci=[-0.02, -0.001], **kw) == "does not hold"
    assert ctx.decide("margin", diff=0.01, ci=[0.002, 0.02], margin=0.05, **kw) == "does not hold"
    assert ctx.claims[0].method == "paired bootstrap" and ctx.claims[0].ci == [0.002, 0.02]
    text = verdict_text(asdict(ctx.claims[0]))
    assert "paired bootstrap" in text and "n = 500" in text
    for bad, match in [(dict(ci=[0.02, 0.002]), "low <= high"), (dict(ci=[0.0, 0.1, 0.2]), "low <= high"),
                       (dict(diff=0.5, ci=[0.0, 0.1]), "outside its interval"), (dict(n=1), "n must"),
                       (dict(method=""), "method"), (dict(ci=[float("nan"), 0.1]), "finite")]:
        args = dict(diff=0.01, ci=[0.0, 0.1]) | kw | bad
        with pytest.raises(ValueError, match=match):
            ctx.decide("bad", **args)
