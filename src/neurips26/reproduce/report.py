"""Render every run under a directory into one static, self-contained ``index.html``.

The page reads like a dashboard: a summary table (claims held / not held / not tested per
experiment, colour-coded; runs that failed or were stopped listed as such), then one section per
experiment with its figures first, its claims, the tables it recorded, its configuration and
environment as tables, and the raw metrics folded away as flattened key / value rows. Images are
embedded as data URIs and the style sheet is inline: the file needs no network and no other file.
"""

from __future__ import annotations

import html
import json
import re
import struct
from pathlib import Path
from typing import Any, Iterator

from .._atomic import atomic_write_text
from ._harness import SCHEMA_KEYS, png_data_uri, verdict

__all__ = ["collect_results", "collect_incomplete", "flatten", "render_index"]

_CSS = """
:root{--yes:#1a7f37;--no:#cf222e;--inconclusive:#8250df;--untested:#9a6700;--other:#57606a;--zero:#8c959f;
--line:#d0d7de;--soft:#f6f8fa;--muted:#59636e}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:0 auto;padding:1em;color:#1f2328;line-height:1.45}
h1{font-size:1.6em}h2{font-size:1.3em;margin-top:0}h3{font-size:1.05em}
h1,h2,h3,h4,p,figcaption,summary,a{overflow-wrap:anywhere}
nav{display:flex;flex-wrap:wrap;gap:.3em .9em;margin:.5em 0 1.5em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
td,th{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--soft)}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td code{word-break:break-all}
table.kv td{overflow-wrap:anywhere}table.kv td.num{text-align:left}
table.kv td:first-child{min-width:min(16em,40vw)}table.kv td code{word-break:normal;overflow-wrap:anywhere}
td .ci{display:block;color:var(--muted);font-size:.85em;font-weight:400}
.badge{display:inline-block;min-width:1.8em;padding:0 .45em;border-radius:1em;color:#fff;font-weight:600;text-align:center}
.badges{white-space:nowrap}
.b-yes{background:var(--yes)}.b-no{background:var(--no)}.b-inconclusive{background:var(--inconclusive)}
.b-untested{background:var(--untested)}.b-other{background:var(--other)}.badge.zero{background:var(--zero)}
.yes{color:var(--yes);font-weight:600}.no{color:var(--no);font-weight:600}
.inconclusive{color:var(--inconclusive);font-weight:600}.untested{color:var(--untested);font-weight:600}
.other{color:var(--other);font-weight:600}
.failed{color:var(--no);font-weight:600}.stopped{color:var(--untested);font-weight:600}
section{border-top:2px solid var(--line);margin-top:2em;padding-top:1em}
.meta{color:var(--muted);font-size:.9em}.paper{display:block;color:var(--muted);font-size:.9em}
.top{float:right;font-size:.85em;font-weight:400;margin-left:.6em}
.figs{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,460px),1fr));gap:1em}
figure{margin:0;min-width:0}figure.wide{grid-column:1/-1}
figure img{display:block;width:100%;height:auto;border:1px solid var(--line)}
figcaption{font-size:.88em;color:var(--muted)}
details{margin:.8em 0}summary{cursor:pointer;font-weight:600}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:var(--soft);padding:.6em;font-size:.85em}
@media (max-width:640px){
body{padding:.6em}h1{font-size:1.35em}h2{font-size:1.15em}
table.cards,table.cards tbody,table.cards tr,table.cards td{display:block}
table.cards{border:0}table.cards thead{display:none}
table.cards tr{border:1px solid var(--line);border-radius:6px;margin:.5em 0;padding:.35em .6em}
table.cards td{border:0;padding:1px 0;text-align:left;overflow-wrap:anywhere}
table.cards td[data-label]{display:inline-block;margin-right:1.1em}
table.cards td[data-label]::before{content:attr(data-label) ": ";color:var(--muted);font-weight:400}
table.cards td:empty{display:none}
table.kv tr{border:0;border-bottom:1px solid var(--line);border-radius:0;margin:0;padding:.25em 0}
table.kv td.num{white-space:normal}
}
"""


def collect_results(out: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every valid results.json under ``out`` (sorted by slug); malformed ones raise."""
    found = []
    for path in sorted(Path(out).glob("*/results.json")):
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from None
        missing = [k for k in SCHEMA_KEYS if k not in data]
        if missing:
            raise ValueError(f"{path}: missing keys {missing}")
        found.append((path, data))
    return sorted(found, key=lambda item: item[1]["slug"])


def collect_incomplete(out: Path) -> list[dict[str, Any]]:
    """Runs whose last attempt did not finish: from ``OUT/SLUG.error.txt`` (written by the harness
    when a run fails or is stopped, removed when one finishes), else from the task cache
    (``OUT/SLUG.tasks/``: 'failed' where a task left a traceback newer than the results, 'stopped'
    where tasks finished after the last results.json, as after a SIGKILL). Each with the number of
    cached tasks and the files that say what happened."""
    incomplete = []
    seen = set()
    for marker in sorted(Path(out).glob("*.error.txt")):
        slug = marker.name[: -len(".error.txt")]
        state = "stopped" if marker.read_text()[:7] == "stopped" else "failed"
        cache = Path(out) / f"{slug}.tasks"
        cached = len([p for p in cache.glob("*.json") if p.name != "run.json"]) if cache.is_dir() else 0
        errors = [marker, *sorted(cache.glob("*.error.txt"))] if cache.is_dir() else [marker]
        incomplete.append({"slug": slug, "state": state, "cached": cached, "errors": errors,
                           "has_results": (Path(out) / slug / "results.json").exists()})
        seen.add(slug)
    for cache in sorted(Path(out).glob("*.tasks")):
        if not cache.is_dir():
            continue
        slug = cache.name[: -len(".tasks")]
        if slug in seen:
            continue
        results = Path(out) / slug / "results.json"
        finished_at = results.stat().st_mtime if results.exists() else float("-inf")
        entries = [p for p in cache.glob("*.json") if p.name != "run.json"]
        errors = sorted(cache.glob("*.error.txt"))
        newer_errors = [p for p in errors if p.stat().st_mtime > finished_at]
        newer_tasks = [p for p in entries if p.stat().st_mtime > finished_at]
        if newer_errors:
            incomplete.append({"slug": slug, "state": "failed", "cached": len(entries), "errors": newer_errors,
                               "has_results": results.exists()})
        elif newer_tasks:
            incomplete.append({"slug": slug, "state": "stopped", "cached": len(entries), "errors": [],
                               "has_results": results.exists()})
    return incomplete


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, scalar-or-short-list) rows of a nested JSON value; long numeric lists are summarized."""
    if isinstance(value, dict):
        if not value and prefix:
            yield prefix, "{}"
        for k, v in value.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list) and value and all(isinstance(v, (dict, list)) for v in value) and len(value) <= 12:
        for i, v in enumerate(value):
            yield from flatten(v, f"{prefix}[{i}]")
    else:
        yield prefix, value


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            if len(v) <= 8:
                return "[" + ", ".join(_fmt(x) for x in v) + "]"
            return f"{len(v)} values: {_fmt(v[0])}, {_fmt(v[1])}, …, {_fmt(v[-1])} (min {_fmt(min(v))}, max {_fmt(max(v))})"
        text = json.dumps(v)
        return text if len(text) <= 200 else f"{len(v)} items: {text[:180]}…"
    return str(v)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kv_table(rows: list[tuple[str, Any]], head: tuple[str, str]) -> str:
    e = html.escape
    body = "".join(
        f"<tr><td><code>{e(k)}</code></td><td class='{'num' if _is_number(v) else ''}'>{e(_fmt(v))}</td></tr>"
        for k, v in rows)
    return (f"<div class='scroll'><table class='cards kv'><thead><tr><th>{e(head[0])}</th><th>{e(head[1])}</th></tr>"
            f"</thead><tbody>{body}</tbody></table></div>")


# the verdicts of _harness.verdict: CSS class and the word the summary uses; any other string
# verdict() may return is shown as it is, in a neutral colour, and counted on its own
_VERDICTS = {"holds": ("yes", "held"), "does not hold": ("no", "not held"),
             "inconclusive": ("inconclusive", "inconclusive"), "not tested": ("untested", "not tested")}


def _verdict_class(v: str) -> str:
    return _VERDICTS.get(v, ("other", v))[0]


def _badge(n: int, verdict_name: str) -> str:
    cls, word = _VERDICTS.get(verdict_name, ("other", verdict_name))
    e = html.escape
    return (f"<span class='badge b-{cls}{' zero' if n == 0 else ''}' title='{n} {e(word)}' "
            f"aria-label='{n} {e(word)}'>{n}</span>")


def _legend() -> str:
    return " / ".join(f"<span class='{cls}'>{word}</span>" for cls, word in _VERDICTS.values())


def _png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR chunk, or None where the file is not a PNG."""
    with open(path, "rb") as fh:
        head = fh.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<file>[^)]+\.png)\)$")


def _report_sections(report_md: Path) -> tuple[dict[str, str], list[str]]:
    """From report.md's results part: the figure captions by file name, and the other blocks
    (tables, headings, text) rendered as HTML, in the order the experiment recorded them."""
    captions: dict[str, str] = {}
    blocks: list[str] = []
    if not report_md.exists():
        return captions, blocks
    text = report_md.read_text()
    _, _, results_part = text.partition("\n## Results\n")
    e = html.escape
    for chunk in re.split(r"\n\s*\n", results_part.strip()):
        lines = chunk.strip().splitlines()
        if not lines:
            continue
        m = _IMAGE.match(lines[0].strip())
        if m and len(lines) == 1:
            captions.setdefault(m["file"], m["alt"])
            continue
        if len(lines) == 1 and lines[0].startswith("*") and lines[0].endswith("*"):
            continue  # the italic caption under a figure, shown as its figcaption
        if lines[0].startswith("|") and len(lines) >= 2:
            head = [c.strip() for c in lines[0].strip().strip("|").split("|")]
            rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[2:]]
            cells = "".join("<tr>" + "".join(
                f"<td class='{'num' if re.fullmatch(r'[-+]?[0-9.eE+-]+%?', c) else ''}'>{e(c)}</td>" for c in row)
                + "</tr>" for row in rows)
            blocks.append("<div class='scroll'><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head)
                          + f"</tr>{cells}</table></div>")
        elif lines[0].startswith("#"):
            level = min(4, len(lines[0]) - len(lines[0].lstrip("#")))
            blocks.append(f"<h{level}>{e(lines[0].lstrip('#').strip())}</h{level}>"
                          + ("<p>" + e(" ".join(lines[1:])) + "</p>" if len(lines) > 1 else ""))
        else:
            blocks.append("<p>" + e(" ".join(line.strip() for line in lines)) + "</p>")
    return captions, blocks


def _paper_of(slug: str) -> str:
    """The paper title of a registered experiment (for a run that failed before writing results)."""
    from . import EXPERIMENTS

    exp = EXPERIMENTS.get(slug)
    return exp.paper if exp is not None else ""


def _summary(results: list[tuple[Path, dict[str, Any]]], incomplete: list[dict[str, Any]]) -> str:
    e = html.escape
    state = {i["slug"]: i for i in incomplete}
    counted = [[verdict(c) for c in r["claims"]] for _, r in results]
    others = sorted({v for vs in counted for v in vs} - set(_VERDICTS))
    rows = []
    for (_, r), verdicts in zip(results, counted):
        badges = " ".join(_badge(verdicts.count(v), v) for v in [*_VERDICTS, *others])
        inc = state.get(r["slug"])
        status = "finished" if inc is None else f"<span class='{inc['state']}'>last attempt {inc['state']}</span>"
        rows.append(
            f"<tr><td><a href='#{e(r['slug'])}'>{e(r['slug'])}</a><span class='paper'>{e(r['paper'])}</span></td>"
            f"<td class='badges' data-label='claims'>{badges}</td><td data-label='status'>{status}</td>"
            f"<td data-label='size'>{'quick' if r['quick'] else 'full'}</td>"
            f"<td class='num' data-label='wall (s)'>{r['wall_s']:.1f}</td></tr>")
    for inc in incomplete:
        if not inc["has_results"]:
            paper = _paper_of(inc["slug"])
            rows.append(f"<tr><td><a href='#{e(inc['slug'])}'>{e(inc['slug'])}</a><span class='paper'>{e(paper)}</span></td>"
                        f"<td class='badges' data-label='claims'>none recorded</td>"
                        f"<td data-label='status'><span class='{inc['state']}'>{inc['state']}</span></td>"
                        f"<td></td><td></td></tr>")
    legend = _legend() + "".join(f" / <span class='other'>{e(v)}</span>" for v in others)
    return ("<div class='scroll' id='summary'><table class='cards'><thead><tr><th>experiment / paper</th>"
            f"<th>claims: {legend}</th><th>status</th><th>size</th><th>wall (s)</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")


def _top() -> str:
    return "<a class='top' href='#summary'>summary &uarr;</a>"


def _tracebacks(inc: dict[str, Any]) -> list[str]:
    e = html.escape
    return [f"<details><summary>{e(err.name)}</summary><pre>{e(err.read_text()[-4000:])}</pre></details>"
            for err in inc["errors"][:3]]


def _incomplete_section(inc: dict[str, Any]) -> str:
    e = html.escape
    what = ("a task failed; its traceback:" if inc["state"] == "failed"
            else "the run was stopped before it wrote its results")
    paper = _paper_of(inc["slug"])
    parts = [f"<section id='{e(inc['slug'])}'><h2>{_top()}{e(inc['slug'])}{': ' + e(paper) if paper else ''} "
             f"<span class='{inc['state']}'>({inc['state']})</span></h2>",
             f"<p>{e(what)} {inc['cached']} finished task(s) are cached; "
             f"<code>neurips26 run {e(inc['slug'])} --resume</code> runs only the rest.</p>"]
    parts += _tracebacks(inc)
    parts.append("</section>")
    return "".join(parts)


def _figure(p: Path, caption: str) -> str:
    e = html.escape
    size = _png_size(p)
    # width / height reserve the image's box before it decodes; a wide figure (two or more panels
    # side by side) takes the whole row, so that its tick labels stay legible
    dims = f" width='{size[0]}' height='{size[1]}'" if size else ""
    wide = size is not None and size[0] >= 2 * size[1]
    cls = " class='wide'" if wide else ""
    return (f"<figure{cls}><img alt='{e(caption)}'{dims} src='{png_data_uri(p)}'>"
            f"<figcaption>{e(caption)}</figcaption></figure>")


def _verdict_cell(c: dict[str, Any], v: str) -> str:
    """The verdict, and under it, for a claim decided over seeds, the mean paired difference
    (positive favours ours) with its confidence interval and the number of seeds."""
    e = html.escape
    detail = ""
    ci = c.get("ci")
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_is_number(x) for x in ci):
        diff = f"{c['diff']:+.4g}, " if _is_number(c.get("diff")) else ""
        level = f"{100 * c['level']:g}% " if _is_number(c.get("level")) else ""
        method = c.get("method", "paired t")
        seeds = "" if not _is_number(c.get("n")) else (f", {c['n']} seeds" if method in ("paired t", "one-sample t")
                                                       else f", n = {c['n']}, {method}")
        capped = f", {c['n_capped']} capped left out" if _is_number(c.get("n_capped")) and c["n_capped"] else ""
        detail = f"<span class='ci'>{e(diff)}{e(level)}CI [{e(_fmt(ci[0]))}, {e(_fmt(ci[1]))}]{e(seeds + capped)}</span>"
    return f"<td class='{_verdict_class(v)}' data-label='verdict'>{e(v)}{detail}</td>"


def _experiment_section(path: Path, r: dict[str, Any], inc: dict[str, Any] | None = None) -> str:
    e = html.escape
    captions, blocks = _report_sections(path.parent / "report.md")
    env = r["env"]
    parts = [f"<section id='{e(r['slug'])}'><h2>{_top()}{e(r['slug'])}: {e(r['paper'])}</h2>",
             f"<p class='meta'>{'quick' if r['quick'] else 'full'} size, seed {r['seed']}, {r['wall_s']:.1f} s, "
             f"commit {e(str(env.get('git_commit') or 'n/a'))[:12]}, torch {e(str(env.get('torch')))}, "
             f"{e(str(env.get('cpu_count')))} CPUs</p>"]
    if inc is not None:
        parts.append(f"<p><span class='{inc['state']}'>The last attempt {inc['state']}</span>; "
                     "the results below are from the run before it.</p>")
        parts += _tracebacks(inc)
    pngs = sorted(path.parent.glob("*.png"), key=lambda p: (list(captions).index(p.name) if p.name in captions else 1e9, p.name))
    if pngs:
        # embedded, so index.html is one self-contained file with no external assets
        parts.append("<div class='figs'>" + "".join(_figure(p, captions.get(p.name, p.stem)) for p in pngs) + "</div>")
    parts.append("<h3>Claims</h3><div class='scroll'><table class='cards'><thead><tr><th>claim</th><th>ours</th>"
                 "<th>baseline</th><th>verdict</th></tr></thead><tbody>")
    for c in r["claims"]:
        v = verdict(c)
        parts.append(f"<tr><td>{e(c['claim'])}</td><td class='num' data-label='ours'>{e(_fmt(c['ours']))}</td>"
                     f"<td class='num' data-label='baseline'>{e(_fmt(c['baseline']))}</td>{_verdict_cell(c, v)}</tr>")
    if not r["claims"]:
        parts.append("<tr><td colspan='4'>no claim tested</td></tr>")
    parts.append("</tbody></table></div>")
    parts += blocks
    parts.append("<h3>Configuration</h3>" + _kv_table(list(flatten(r["config"])), ("setting", "value")))
    parts.append("<details><summary>Environment</summary>" + _kv_table(list(flatten(env)), ("", "")) + "</details>")
    metrics = list(flatten(r["metrics"]))
    parts.append(f"<details><summary>Raw metrics ({len(metrics)} values)</summary>"
                 + _kv_table(metrics, ("metric", "value")) + "</details></section>")
    return "".join(parts)


def render_index(out: Path) -> Path:
    """Write ``out/index.html`` from every run under ``out`` (atomically) and return its path."""
    results = collect_results(out)
    incomplete = collect_incomplete(out)
    e = html.escape
    slugs = [r["slug"] for _, r in results] + [i["slug"] for i in incomplete if not i["has_results"]]
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>neurips26 results</title><style>{_CSS}</style></head><body>",
             "<h1>neurips26 reproductions</h1>",
             "<p class='meta'>Each claim compares our number with the strongest baseline's from the same run: "
             "<span class='yes'>held</span>, <span class='no'>not held</span>, "
             "<span class='inconclusive'>inconclusive</span> (the uncertainty over seeds covers both outcomes), "
             "or <span class='untested'>not tested</span> (both sides hit a cap, so the comparison says nothing).</p>",
             "<nav>" + "".join(f"<a href='#{e(s)}'>{e(s)}</a>" for s in slugs) + "</nav>",
             _summary(results, incomplete)]
    state = {i["slug"]: i for i in incomplete}
    parts += [_experiment_section(path, r, state.get(r["slug"])) for path, r in results]
    parts += [_incomplete_section(i) for i in incomplete if not i["has_results"]]
    parts.append("</body></html>")
    index = Path(out) / "index.html"
    atomic_write_text(index, "\n".join(parts))
    return index
