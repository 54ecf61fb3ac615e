"""Chunking: sentences never cross a chunk boundary; chunks respect the token cap; sources are traced."""

from __future__ import annotations

import itertools

import pytest

from harness.text.chunking import chunk_paragraphs, chunk_sentences, split_long_sentence
from harness.text.tokens import WordCounter, resolve_token_counter

count = WordCounter().count


def test_sentence_that_would_cross_the_boundary_moves_whole_to_the_next_chunk():
    # 4 + 3 = 7 fits in 8; the 5-word sentence would make 12, so it starts chunk 2; 5 + 2 = 7 fits.
    sentences = ["one two three four.", "five six seven.", "a b c d e.", "f g."]
    chunks = chunk_sentences(sentences, 8, count)
    assert [c.sentences for c in chunks] == [
        ("one two three four.", "five six seven."),
        ("a b c d e.", "f g."),
    ]
    assert [c.tokens for c in chunks] == [7, 7]
    assert chunks[0].text == "one two three four. five six seven."


def test_every_chunk_respects_the_cap_and_keeps_every_word_in_order():
    sentences = [" ".join(f"w{i}_{j}" for j in range(n)) + "." for i, n in enumerate([3, 9, 1, 4, 4, 7, 2, 8, 5])]
    chunks = chunk_sentences(sentences, 10, count)
    assert all(c.tokens <= 10 for c in chunks)
    assert " ".join(c.text for c in chunks).split() == " ".join(sentences).split()
    # Greedy: no chunk could have taken the next chunk's first sentence.
    for left, right in itertools.pairwise(chunks):
        assert left.tokens + count(right.sentences[0]) > 10


def test_a_sentence_longer_than_a_chunk_is_cut_at_words():
    long = " ".join(f"x{i}" for i in range(23))
    assert split_long_sentence(long, 10, count) == [
        " ".join(f"x{i}" for i in range(10)),
        " ".join(f"x{i}" for i in range(10, 20)),
        " ".join(f"x{i}" for i in range(20, 23)),
    ]
    chunks = chunk_sentences(["short one.", long], 10, count)
    assert [c.tokens for c in chunks] == [2, 10, 10, 3]


def test_chunk_paragraphs_traces_sentences_to_their_paragraphs():
    paragraphs = ["Alpha beta gamma. Delta epsilon.", "", "Zeta eta theta iota. Kappa."]
    chunks = chunk_paragraphs(paragraphs, 6, count)
    assert [c.sentences for c in chunks] == [
        ("Alpha beta gamma.", "Delta epsilon."),
        ("Zeta eta theta iota.", "Kappa."),
    ]
    assert [c.sources for c in chunks] == [(0,), (2,)]
    merged = chunk_paragraphs(paragraphs, 100, count)
    assert len(merged) == 1 and merged[0].sources == (0, 2)


def test_bad_chunk_size_and_misaligned_sources_are_rejected():
    with pytest.raises(ValueError, match="chunk_tokens"):
        chunk_sentences(["a."], 0, count)
    with pytest.raises(ValueError, match="source tags"):
        chunk_sentences(["a.", "b."], 5, count, sources=[0])


def test_word_counter_counts_and_truncates_words():
    counter = resolve_token_counter(None)
    assert counter.count("a  b\nc") == 3
    assert counter.count_many(["a b", ""]) == [2, 0]
    assert counter.truncate("a b c d", 2) == "a b"
    assert counter.truncate("a b", 0) == ""
