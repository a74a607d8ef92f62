"""``GET /``: the status page, server-rendered HTML with no script and no build step, that
refreshes itself (``<meta http-equiv="refresh">``): every launch, its verdict and coverage,
its lifecycle, its slots (process, evidence age, counts, reasons) and its reasons, times in
UTC and relative to the judgement. Every value from evidence is escaped.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable
from typing import Any

from ecpa.serve.board import VERSION, Entry, Snapshot

__all__ = ["render_page"]

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;margin:0 0 .3em}h2{font-size:1.1em;margin:1.2em 0 .3em}
table{border-collapse:collapse;margin:.3em 0}td,th{border:1px solid #ccc;padding:2px 6px;
text-align:left;vertical-align:top}th{background:#f3f3f3}.yes{color:#0a6b0a;font-weight:600}
.no{color:#b00020;font-weight:600}.meta{color:#666}.launch{border-top:2px solid #ddd;
margin-top:1em}code{font-size:.95em}ul{margin:.2em 0;padding-left:1.3em}
"""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _when(epoch: object, now: float) -> str:
    """``epoch`` as ISO 8601 UTC and how long before ``now``; "-" when unknown."""
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        return "-"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    delta = int(now) - epoch
    ago = f"{delta} s ago" if delta >= 0 else f"in {-delta} s"
    return f"{stamp} ({ago})"


def _flag(value: object) -> str:
    return '<span class="yes">true</span>' if value is True else '<span class="no">false</span>'


def _reasons(reasons: Iterable[Any]) -> str:
    items = "".join(
        f"<li><code>{_esc(r.get('code'))}</code> {_esc(r.get('text'))}</li>"
        for r in reasons
        if isinstance(r, dict)
    )
    return f"<ul>{items}</ul>" if items else "-"


def _lifecycle(doc: dict[str, Any]) -> str:
    stages = doc.get("lifecycle") or {}
    rows = "".join(
        f"<tr><td>{_esc(name)}</td><td>{_flag(stage.get('state'))}</td>"
        f"<td>{_esc(stage.get('detail'))}</td></tr>"
        for name, stage in stages.items()
        if isinstance(stage, dict)
    )
    return f"<table><tr><th>stage</th><th>state</th><th>detail</th></tr>{rows}</table>"


def _slots(doc: dict[str, Any], now: float) -> str:
    rows = []
    for slot in doc.get("slots") or []:
        proc = slot.get("process") or {}
        counters = slot.get("counters") or {}
        counts = " / ".join(
            str(counters.get(k, "-")) for k in ("calls", "selections", "abstentions", "failures")
        )
        host = slot.get("host") or {}
        seen = host.get("dispatches") or {}
        witnessed = " / ".join(
            str(seen.get(k, "-")) for k in ("selected", "abstained", "invalid", "exception")
        )
        rows.append(
            f"<tr><td>{_esc(slot.get('slot'))}</td><td>{_flag(slot.get('covered'))}</td>"
            f"<td>{_esc(proc.get('host', '-'))} {_esc(proc.get('pid', ''))}</td>"
            f"<td>{_esc(slot.get('age_s', '-'))}</td>"
            f"<td>{_esc(_when(slot.get('last_dispatch_at'), now))}</td>"
            f"<td>{_esc(counts)}</td><td>{_esc(slot.get('source', '-'))}</td>"
            f"<td>{_esc(witnessed)}</td><td>{_reasons(slot.get('reasons') or [])}</td></tr>"
        )
    if not rows:
        return "<p>no obligated slots</p>"
    head = (
        "<tr><th>slot</th><th>covered</th><th>process</th><th>evidence age (s)</th>"
        "<th>last dispatch</th><th>calls / selections / abstentions / failures</th>"
        "<th>backed by</th><th>host witnessed: selected / abstained / invalid / exception</th>"
        "<th>reasons</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _launch(entry: Entry, now: float) -> str:
    doc, summary = entry.document, entry.summary
    coverage = doc.get("coverage") or {}
    ended = summary.get("ended_how") or "no"
    return (
        f'<section class="launch" id="{_esc(entry.launch_id)}">'
        f"<h2>{_esc(entry.launch_id)}: runtime_effective {_flag(entry.effective)}</h2>"
        f'<p class="meta">source {_esc(entry.source)} &middot; coverage '
        f"{_esc(coverage.get('covered', 0))}/{_esc(coverage.get('slots', 0))} slots &middot; "
        f"started {_esc(_when(summary.get('started_at'), now))} &middot; ended: {_esc(ended)}"
        f" &middot; judged {_esc(_when(doc.get('now'), now))}</p>"
        f"<h3>Lifecycle</h3>{_lifecycle(doc)}<h3>Slots</h3>{_slots(doc, now)}"
        f"<h3>Reasons</h3>{_reasons(doc.get('reasons') or [])}</section>"
    )


def render_page(snapshot: Snapshot, *, stale: bool, refresh_s: int) -> bytes:
    """The page for ``snapshot`` (``stale``: its launches are withdrawn, said at the top)."""
    now = snapshot.refreshed_at
    effective = sum(e.effective for e in snapshot.entries.values())
    sources = "".join(
        f"<li>{_esc(name)}: {'read' if error is None else _esc('not read: ' + error)}</li>"
        for name, error in snapshot.sources
    )
    skipped = "".join(
        f"<li>{_esc(s.get('source'))}/{_esc(s.get('name'))}: {_esc(s.get('detail'))}</li>"
        for s in snapshot.skipped
    )
    warning = (
        '<p class="no">The newest judgement is too old: every launch is shown not effective.</p>'
        if stale
        else ""
    )
    body = "".join(_launch(e, now) for e in snapshot.entries.values()) or "<p>no launches</p>"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="{int(refresh_s)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>ecpa serve: {effective}/{len(snapshot.entries)} effective</title>"
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>ecpa serve: {effective} of {len(snapshot.entries)} launches runtime_effective</h1>"
        f'<p class="meta">judged {_esc(_when(int(now), now))} in {snapshot.took_s:.3f} s '
        f"&middot; refreshes every {int(refresh_s)} s &middot; ecpa {_esc(VERSION)}</p>"
        f"{warning}<h2>Sources</h2><ul>{sources}</ul>{body}"
        + (f"<h2>Skipped</h2><ul>{skipped}</ul>" if skipped else "")
        + "</body></html>\n"
    ).encode()
