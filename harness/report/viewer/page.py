"""One self-contained HTML file: the page's CSS and JavaScript inline and the data as gzip-compressed JSON in a
script tag (decompressed by the browser's own DecompressionStream), so it opens offline and can be mailed."""

from __future__ import annotations

import base64
import gzip
import html
import json
from importlib import resources
from typing import Any


def _asset(name: str) -> str:
    return resources.files("harness.report.viewer").joinpath(name).read_text(encoding="utf-8")


def encode_payload(payload: dict[str, Any]) -> str:
    """The payload as base64 of gzip'd compact JSON (mtime 0: the same rows give the same file)."""
    raw = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def render_page(payload: dict[str, Any]) -> str:
    # The template holds no braces of its own: CSS, JS and data are inserted as values, never parsed.
    return _asset("page.html").format(
        title=html.escape(str(payload.get("title", "evidence viewer"))),
        css=_asset("page.css"),
        js=_asset("page.js"),
        payload=encode_payload(payload),
    )
