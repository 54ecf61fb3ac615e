"""The rule-based sentence splitter on hand-checked cases."""

from __future__ import annotations

import pytest

from harness.text.sentences import split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three? Four", ("One.", "Two!", "Three?", "Four")),
        ("It opened in 1926. 31,000 seats were added.", ("It opened in 1926.", "31,000 seats were added.")),
        # Closing quotes and brackets stay with their sentence; opening ones start the next.
        ('He said "go." (Then he left.) "Why?" she asked.', ('He said "go."', "(Then he left.)", '"Why?" she asked.')),
        # Abbreviations and initials do not end a sentence.
        (
            "Dr. Lee met J. R. R. Tolkien in St. Ives. They talked.",
            ("Dr. Lee met J. R. R. Tolkien in St. Ives.", "They talked."),
        ),
        (
            "G.K. Chesterton wrote it, e.g. The Blue Cross. It sold.",
            ("G.K. Chesterton wrote it, e.g. The Blue Cross.", "It sold."),
        ),
        ("Li Kuang (d. 1599) ruled. He fell.", ("Li Kuang (d. 1599) ruled.", "He fell.")),
        ("He served in World War I. He returned.", ("He served in World War I.", "He returned.")),
        # No boundary without whitespace, or before a lower-case word, or inside a decimal.
        (
            "Governor-General.The parliament has 2.5 seats. and more",
            ("Governor-General.The parliament has 2.5 seats. and more",),
        ),
        ("  Leading and trailing space.   Next.  ", ("Leading and trailing space.", "Next.")),
        ("", ()),
        ("   ", ()),
        ("no full stop at all", ("no full stop at all",)),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_rejoined_sentences_give_back_the_text():
    text = "Alpha is first.  Beta follows\nthe first. Gamma? Delta!  Epsilon ends it."
    sentences = split_sentences(text)
    assert len(sentences) == 5
    assert " ".join(sentences).split() == text.split()
