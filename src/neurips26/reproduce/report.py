"""Render every ``results.json`` under a directory into one static ``index.html``."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from .._atomic import atomic_write_text
from ._harness import SCHEMA_KEYS, png_data_uri, tally, verdict

__all__ = ["collect_results", "render_index"]

_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f3f3f3}.no{color:#b00;font-weight:bold}.yes{color:#070}.untested{color:#a60}img{max-width:100%;margin:.5em 0}
section{border-top:2px solid #ddd;margin-top:2em}code{background:#f6f6f6}
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


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, dict)):
        text = json.dumps(v)
        return text if len(text) < 80 else text[:77] + "..."
    return str(v)


def render_index(out: Path) -> Path:
    results = collect_results(out)
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>neurips26 results</title><style>{_CSS}</style></head><body>"]
    parts.append("<h1>neurips26 reproductions</h1><table><tr><th>experiment</th><th>paper</th><th>claims held / tested</th><th>size</th><th>seed</th><th>wall (s)</th></tr>")
    for _, r in results:
        held, tested = tally(r["claims"])
        parts.append(
            f"<tr><td><a href='#{e(r['slug'])}'>{e(r['slug'])}</a></td><td>{e(r['paper'])}</td>"
            f"<td>{held} / {tested}</td><td>{'quick' if r['quick'] else 'full'}</td><td>{r['seed']}</td><td>{r['wall_s']:.1f}</td></tr>"
        )
    parts.append("</table>")
    for path, r in results:
        parts.append(f"<section id='{e(r['slug'])}'><h2>{e(r['slug'])}: {e(r['paper'])}</h2>")
        parts.append("<table><tr><th>claim</th><th>ours</th><th>baseline</th><th>holds</th></tr>")
        for c in r["claims"]:
            cls = {"holds": "yes", "does not hold": "no", "not tested": "untested"}[verdict(c)]
            parts.append(f"<tr><td>{e(c['claim'])}</td><td>{_fmt(c['ours'])}</td><td>{_fmt(c['baseline'])}</td><td class='{cls}'>{e(verdict(c))}</td></tr>")
        parts.append("</table><h3>metrics</h3><table>")
        parts += [f"<tr><td><code>{e(k)}</code></td><td>{e(_fmt(v))}</td></tr>" for k, v in r["metrics"].items()]
        parts.append("</table>")
        for png in sorted(path.parent.glob("*.png")):
            # Embedded, so index.html is one self-contained file with no external assets.
            parts.append(f"<figure><img alt='{e(png.stem)}' src='{png_data_uri(png)}'><figcaption>{e(png.name)}</figcaption></figure>")
        parts.append(f"<p>env: <code>{e(json.dumps(r['env']))}</code></p></section>")
    parts.append("</body></html>")
    index = Path(out) / "index.html"
    atomic_write_text(index, "\n".join(parts))
    return index
