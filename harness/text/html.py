"""Paragraphs of an HTML page (QuALITY articles, NarrativeQA's movie scripts) as plain text."""

from __future__ import annotations

from html.parser import HTMLParser

_BLOCK_TAGS = frozenset(
    [
        "p",
        "div",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "li",
        "blockquote",
        "pre",
        "hr",
        "table",
        "tr",
        "title",
        "body",
        "html",
    ]
)
_SKIP_TAGS = frozenset(["script", "style", "head"])


class _ParagraphParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._current: list[str] = []
        self._skip = 0
        self._breaks = 0  # consecutive <br> since the last text

    def _flush(self) -> None:
        text = " ".join("".join(self._current).split())
        if text:
            self.paragraphs.append(text)
        self._current = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag in _BLOCK_TAGS:
            self._flush()
        elif tag == "br":
            self._breaks += 1
            if self._breaks >= 2:  # a blank line inside a block separates paragraphs
                self._flush()
            else:
                self._current.append(" ")

    def handle_startendtag(self, tag: str, attrs) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK_TAGS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if data.strip():
            self._breaks = 0
        self._current.append(data)

    def close(self) -> None:
        super().close()
        self._flush()


def html_paragraphs(html: str) -> list[str]:
    """Paragraph texts of an HTML document (whitespace collapsed, scripts and styles dropped)."""
    parser = _ParagraphParser()
    parser.feed(html)
    parser.close()
    return parser.paragraphs
