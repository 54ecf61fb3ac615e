"""One row's context as a small self-contained HTML fragment, marked as the viewer marks it.

The same marks as ``renderContext`` in ``page.js``: per snippet its source title (and the document sentences
it holds), a solid border for a gold document, a tinted background for a supporting sentence, a dashed
border and grey text for the fragment a budget cut, italics for a summary node, badges for a summary's
layer, an injected copy's source, a cut and a supporting sentence; ``<mark class="answer">`` around each
gold answer span. The styles are inline (a W&B ``Html`` cell shows the fragment alone, without the
viewer's stylesheet); the class names are the viewer's, so a fragment reads the same in either place.
Rows written before provenance was recorded give the escaped plain context (answer spans still marked
when the row has them).
"""

from __future__ import annotations

import html
import json
from typing import Any

SNIPPET_STYLE = "display:block;padding:3px 6px;margin:2px 0;border-left:4px solid #d5dbe1"
GOLD_BORDER = "border-left-color:#2a9d8f"
SUPPORTING_BACKGROUND = "background:#e8f6f3"
CUT_STYLE = "border-left-style:dashed;color:#6a7580"
SUMMARY_STYLE = "font-style:italic;background:#f3effa"
SOURCE_STYLE = "display:block;font-size:11px;color:#6a7580"
MARK_STYLE = "background:#ffd166;padding:0 1px;border-radius:2px"
BADGE_STYLE = "font-size:10px;padding:0 5px;border-radius:8px;margin-left:4px;background:{}"
BADGE_COLOURS = {"gold": "#b9e4dd", "summary": "#ddd0f4", "copy": "#f8d3c5", "cut": "#eee", "sup": "#c9ece5"}
CONTAINER_STYLE = "font:13px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1d232a"


def _escape(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def _parse(value: str | None) -> Any:
    """A provenance column's JSON, or None where the row has none (missing, NaN, empty or unreadable)."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def _spans(value: str | None) -> list[tuple[int, int]]:
    parsed = _parse(value)
    if not isinstance(parsed, list):
        return []
    spans = []
    for span in parsed:
        if isinstance(span, (list, tuple)) and len(span) == 2:
            try:
                spans.append((int(span[0]), int(span[1])))
            except (TypeError, ValueError):
                continue
    return sorted(spans)


def _text(context: str, start: int, end: int, spans: list[tuple[int, int]]) -> str:
    """The characters [start, end) of the context, escaped, with the answer spans marked."""
    out, at = [], start
    for k, (a, b) in enumerate(spans):
        lo, hi = max(a, at), min(b, end)
        if lo >= hi:
            continue
        out.append(_escape(context[at:lo]))
        out.append(f'<mark class="answer" data-span="{k}" style="{MARK_STYLE}">{_escape(context[lo:hi])}</mark>')
        at = hi
    out.append(_escape(context[at:end]))
    return "".join(out)


def _badge(kind: str, label: str) -> str:
    return f'<span class="badge {kind}" style="{BADGE_STYLE.format(BADGE_COLOURS[kind])}">{_escape(label)}</span>'


def _snippet(record: dict[str, Any], context: str, spans: list[tuple[int, int]]) -> str:
    kind = str(record.get("kind") or "document")
    classes, styles = ["snippet", f"kind-{kind}"], [SNIPPET_STYLE]
    badges = []
    if record.get("gold"):
        classes.append("gold")
        styles.append(GOLD_BORDER)
        badges.append(_badge("gold", "gold document"))
    if record.get("sup"):
        classes.append("supporting")
        styles.append(SUPPORTING_BACKGROUND)
    if record.get("cut"):
        classes.append("cut")
        styles.append(CUT_STYLE)
    if kind == "summary":
        styles.append(SUMMARY_STYLE)
        layer = record.get("layer")
        badges.append(_badge("summary", f"summary L{'?' if layer is None else layer}"))
    if kind == "copy":
        badges.append(_badge("copy", f"copy of {record.get('copy_of') or record.get('doc') or '?'}"))
    if record.get("cut"):
        badges.append(_badge("cut", "cut by budget"))
    if record.get("sup"):
        badges.append(_badge("sup", "supporting"))
    doc = str(record.get("doc") or "")
    title = str(record.get("title") or doc)
    sents = record.get("sents") or []
    where = f" · sent. {','.join(str(s) for s in sents)}" if sents else ""
    tip = f"{title} ({doc}{where}) · {record.get('tok', '?')} tokens{' · gold document' if record.get('gold') else ''}"
    try:
        start = max(0, min(int(record.get("start", 0)), len(context)))
        end = max(start, min(int(record.get("end", start)), len(context)))
    except (TypeError, ValueError):
        start = end = 0
    return (
        f'<div class="{" ".join(classes)}" style="{";".join(styles)}" title="{_escape(tip)}">'
        f'<span class="source" style="{SOURCE_STYLE}">{_escape(title)}{_escape(where)}</span>{"".join(badges)}'
        f'<span class="text">{_text(context, start, end, spans)}</span></div>'
    )


def context_html(context: str, snippets_json: str | None, spans_json: str | None) -> str:
    """One row's ``context`` as an HTML fragment with the viewer's provenance marks (see the module doc)."""
    context = "" if not isinstance(context, str) else context
    spans = _spans(spans_json)
    snippets = _parse(snippets_json)
    if not isinstance(snippets, list) or not snippets or not all(isinstance(s, dict) for s in snippets):
        body = _text(context, 0, len(context), spans)
        return f'<div class="context plain" style="{CONTAINER_STYLE};white-space:pre-wrap">{body}</div>'
    parts = "".join(_snippet(record, context, spans) for record in snippets)
    return f'<div class="context" style="{CONTAINER_STYLE}">{parts}</div>'
