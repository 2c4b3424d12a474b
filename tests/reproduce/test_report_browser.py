"""`neurips26 report`'s index.html opened in a real browser: Debian's chromium driven by Playwright's
Python package, with ``executable_path`` on the system chromium (nothing is downloaded).

The report is built, by the CLI, from a realistic directory of runs: a real riemannian-bilevel run at a
tiny size (its own figures, tables and report.md), every committed quick reference
(results/quick/SLUG.json: long configurations, environments, hundreds of metrics), figures of the
shapes experiments draw (two panels side by side, tall, ordinary), a claim decided over seeds with
its interval, a long unbroken path in a configuration, a run whose last attempt was stopped, and one
that failed before writing anything. In the browser: every image loads; the page never scrolls
sideways at 1280 and 390 px, with every <details> folded and unfolded (a wide table may scroll inside
its own container); every in-page link lands on an element, each experiment's section is reached
from the summary table and leads back to it; the four verdicts have four different colours; the page
asks for nothing over the network and raises no script error."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (it is in the dev extra: pip install -e '.[dev]')")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no chromium on PATH: the report's browser test needs Debian's chromium "
                "(apt-get install chromium; .ci/run installs it when run as root)", allow_module_level=True)

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from neurips26 import cli, reproduce  # noqa: E402
from neurips26.reproduce import Experiment, run_experiment  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
WIDTHS = (1280, 390)
# the riemannian-bilevel run at the size of its own end-to-end test (a few seconds)
TINY_RB = dict(problems=["stiefel", "grassmann"], steps=6, seeds=2, inner_steps=5,
               stiefel=dict(channels=8, r=3, n_train=4, n_val=8, lr_x=0.1), grassmann=dict(r=2, n_train=60, lr_x=0.1),
               poincare=dict(depth=2, anchors=6, lr_x=0.1), meta=dict(tasks=1, r=8, query=2, shots=1, lr_x=0.1),
               batches=[16, 32, 64], reps=4, boot=20, Ts=[2, 4, 6])


def _figure(path: Path, size: tuple[float, float], panels: int) -> None:
    fig, axes = plt.subplots(1, panels, figsize=size, squeeze=False)
    for i, ax in enumerate(axes[0]):
        ax.plot(range(50), [((k + 1) ** -0.5) * (i + 1) for k in range(50)], label="ours")
        ax.plot(range(50), [((k + 1) ** -0.3) * (i + 1) for k in range(50)], label="baseline")
        ax.set(xlabel="step", ylabel="regret", yscale="log", title=f"panel {i}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """OUT with a realistic set of runs, rendered by `neurips26 report --out OUT`; returns OUT/index.html."""
    out = tmp_path_factory.mktemp("report-out")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(HERE))  # fake_experiments.py
        quick = sorted((REPO / "results" / "quick").glob("*.json"))
        assert quick, "no committed quick results under results/quick/"
        real = set()
        if importlib.util.find_spec("geoopt") is not None:
            from neurips26.reproduce import riemannian_bilevel

            mp.setitem(riemannian_bilevel.SIZES, True, TINY_RB)
            run_experiment(reproduce.get("riemannian-bilevel"), out, seed=0, quick=True)
            real.add("riemannian-bilevel")
        for ref in quick:
            data = json.loads(ref.read_text())
            if data["slug"] in real:
                continue
            (out / data["slug"]).mkdir()
            (out / data["slug"] / "results.json").write_text(json.dumps(data))
        first = json.loads(quick[0].read_text())["slug"]
        _figure(out / first / "wide.png", (13, 3.6), 3)
        _figure(out / first / "tall.png", (5, 8), 1)
        _figure(out / first / "plain.png", (6.4, 4.8), 1)
        # a claim decided over seeds whose interval contains zero, and a long unbroken path in a config
        path = out / first / "results.json"
        data = json.loads(path.read_text())
        data["claims"].append({"claim": "ours beats the baseline over seeds", "ours": 1.02, "baseline": 1.0,
                               "holds": None, "verdict": "inconclusive", "n": 3, "n_capped": 0, "better": "higher",
                               "margin": 0.0, "level": 0.95, "diff": 0.02, "ci": [-0.01, 0.05],
                               "ours_seeds": [1.0, 1.02, 1.04], "baseline_seeds": [1.0, 1.0, 1.0]})
        data["config"]["checkpoint"] = "/data/" + "/".join(f"very_long_directory_name_{i}" for i in range(12))
        path.write_text(json.dumps(data))
        # a finished run whose later attempt was stopped, and a run that failed before writing anything
        run_experiment(Experiment(slug="fake-ok", paper="A finished run", summary="t", target="fake_experiments:ok"),
                       out, seed=0)
        (out / "fake-ok.error.txt").write_text("stopped at 2026-12-05T12:00:00\n\n" + "KeyboardInterrupt " * 40)
        with pytest.raises(RuntimeError, match="deliberate failure"):
            run_experiment(Experiment(slug="fake-boom", paper="A failed run", summary="t",
                                      target="fake_experiments:boom"), out, seed=0)
    assert cli.main(["report", "--out", str(out)]) == 0
    index = out / "index.html"
    assert index.exists()
    return index


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM)
        yield b
        b.close()


@pytest.fixture
def open_page(browser, site):
    """open_page(width) -> a page showing the report at that viewport width; every request that is not
    for a file: or data: URL is aborted and recorded, as is every script error."""
    pages = []

    def _open(width: int):
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.foreign, page.errors = [], []

        def route(r):
            url = r.request.url
            if url.startswith(("file:", "data:")):
                r.continue_()
            else:
                page.foreign.append(url)
                r.abort()

        page.route("**", route)
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.goto(site.as_uri())
        page.wait_for_load_state("load")
        pages.append(page)
        return page

    yield _open
    for p in pages:
        p.close()


_OVERFLOW = """() => {
  const W = window.innerWidth;
  // elements sticking out of the viewport that are not inside a container of their own that scrolls
  const own = e => { for (let a = e.parentElement; a; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') return true; }
    return false; };
  const right = e => Math.max(e.getBoundingClientRect().right,
                               e.getBoundingClientRect().left + (getComputedStyle(e).overflowX === 'visible' ? e.scrollWidth : 0));
  const out = [...document.body.querySelectorAll('*')].filter(e => right(e) > W + 0.5 && !own(e))
    .slice(0, 8).map(e => `${e.tagName.toLowerCase()}.${e.className} right=${Math.round(right(e))}`
                          + ` "${(e.textContent || '').trim().slice(0, 50)}"`);
  return {scrollWidth: document.documentElement.scrollWidth, width: W, out};
}"""


def test_the_report_has_every_kind_of_run(site):
    text = site.read_text()
    for slug in ["riemannian-bilevel", "fake-ok", "fake-boom",
                 *(p.stem for p in (REPO / "results" / "quick").glob("*.json"))]:
        if slug == "riemannian-bilevel" and importlib.util.find_spec("geoopt") is None:
            continue
        assert f"<section id='{slug}'>" in text, slug
    assert "last attempt stopped" in text and "deliberate failure" in text


def test_every_image_loads(open_page):
    page = open_page(1280)
    imgs = page.evaluate("() => [...document.images].map(i => ({alt: i.alt, complete: i.complete,"
                         " w: i.naturalWidth, shown: i.getBoundingClientRect().width}))")
    assert len(imgs) >= 5  # the real run's figures, the fake run's, the three drawn here
    broken = [i["alt"] for i in imgs if not (i["complete"] and i["w"] > 0 and i["shown"] > 0)]
    assert not broken, f"images that did not load or show: {broken}"


@pytest.mark.parametrize("width", WIDTHS)
def test_no_horizontal_overflow(open_page, width):
    page = open_page(width)
    folded = page.evaluate(_OVERFLOW)
    assert folded["scrollWidth"] <= folded["width"], f"at {width} px the page scrolls sideways: {folded}"
    n = page.evaluate("() => { const d = [...document.querySelectorAll('details')]; d.forEach(x => x.open = true);"
                      " return d.length; }")
    assert n >= 3  # environment, raw metrics, tracebacks
    unfolded = page.evaluate(_OVERFLOW)
    assert unfolded["scrollWidth"] <= unfolded["width"], \
        f"at {width} px, with every <details> open, the page scrolls sideways: {unfolded}"
    # the summary and the claims tables fit the page without scrolling inside their containers
    # (on a narrow screen each row becomes a card), unlike a wide table of numbers, which may
    wide = page.evaluate("() => [...document.querySelectorAll('table.cards')].filter(t => t.parentElement.scrollWidth"
                         " > t.parentElement.clientWidth + 1).map(t => t.closest('section')?.id ?? 'summary')")
    assert not wide, f"at {width} px these summary / claims tables need a sideways scroll: {wide}"
    # figures are never wider than the page either
    assert page.evaluate("() => [...document.images].every(i => i.getBoundingClientRect().right <= window.innerWidth)")


@pytest.mark.parametrize("width", WIDTHS)
def test_links_land_and_every_section_is_reached_from_the_summary(open_page, width):
    page = open_page(width)
    links = page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
    assert links and all(h.startswith("#") for h in links), [h for h in links if not h.startswith("#")]
    missing = page.evaluate("hs => hs.filter(h => !document.getElementById(decodeURIComponent(h.slice(1))))",
                            links)
    assert not missing, f"links to no element: {missing}"
    sections = page.evaluate("() => [...document.querySelectorAll('section[id]')].map(s => s.id)")
    summary = page.evaluate("() => [...document.querySelectorAll('#summary a[href^=\"#\"]')]"
                            ".map(a => a.getAttribute('href').slice(1))")
    assert sorted(summary) == sorted(sections) and len(sections) >= 5
    for slug in sections:
        page.click(f"#summary a[href='#{slug}']")
        where = page.evaluate("id => { const r = document.getElementById(id).getBoundingClientRect();"
                              " return {hash: location.hash, top: r.top, bottom: r.bottom, h: window.innerHeight,"
                              " atEnd: window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 1}; }",
                              slug)
        assert where["hash"] == f"#{slug}"
        # the section's top is at the top of the window, or the page is scrolled to its end
        assert abs(where["top"]) <= 2 or (where["atEnd"] and 0 <= where["top"] < where["h"]), (slug, where)
        page.click(f"section[id='{slug}'] a.top")
        assert abs(page.evaluate("() => document.getElementById('summary').getBoundingClientRect().top")) <= 2


def test_the_four_verdicts_have_four_colours(open_page):
    page = open_page(1280)
    colours = page.evaluate("""() => ['yes', 'no', 'inconclusive', 'untested'].map(k => {
        const s = document.createElement('span'); s.className = 'badge b-' + k; document.body.appendChild(s);
        const c = getComputedStyle(s).backgroundColor; s.remove(); return c; })""")
    assert len(set(colours)) == 4 and "rgba(0, 0, 0, 0)" not in colours, colours
    # the summary shows a badge per verdict for every finished run
    rows = page.evaluate("() => [...document.querySelectorAll('#summary tbody tr')].map(r => r.querySelectorAll('.badge').length)")
    assert rows.count(4) >= 3
    # the claim decided over seeds whose interval contains zero reads as inconclusive, in its colour,
    # with its difference and interval, and is counted in the summary
    # (the committed runs have inconclusive claims of their own: find the one this fixture appended)
    cell = page.evaluate("""() => { const td = [...document.querySelectorAll('td.inconclusive')]
            .find(t => t.textContent.startsWith('inconclusive+0.02'));
        return td && {text: td.textContent, colour: getComputedStyle(td).color}; }""")
    assert cell is not None and cell["text"].startswith("inconclusive+0.02, 95% CI [-0.01, 0.05], 3 seeds"), cell
    assert cell["colour"] == colours[2]
    first = sorted((REPO / "results" / "quick").glob("*.json"))[0].stem  # the run given that claim
    counted = page.evaluate("s => document.querySelector(`#summary a[href='#${s}']`).closest('tr')"
                            ".querySelector('.badge.b-inconclusive').textContent", first)
    committed = json.loads((REPO / "results" / "quick" / f"{first}.json").read_text())["claims"]
    assert int(counted) == 1 + sum(c.get("verdict") == "inconclusive" for c in committed)


def test_no_network_request_and_no_script_error(open_page, site):
    for width in WIDTHS:
        page = open_page(width)
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
        page.wait_for_timeout(50)
        assert page.foreign == [], f"the report asked the network for {page.foreign}"
        assert page.errors == []
    text = site.read_text()
    assert "http://" not in text and "https://" not in text and "<script" not in text
