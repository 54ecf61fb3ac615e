"""BM25 and fusion settings out of range, and an empty corpus, are one config error line naming the key, exit
status 2, before any model loads; the settings enter the pool key."""

from __future__ import annotations

import json

import pytest

from harness.cache.pools import pool_key
from harness.core.types import Document, Example
from harness.run.config_check import problems
from tests.conftest import REPO, compose_cfg
from tests.test_config_check import harness


def only_problem(*overrides: str) -> str:
    found = problems(compose_cfg(overrides))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    "overrides,start,allowed",
    [
        (["retriever.bm25.variant=okapi"], "retriever.bm25.variant='okapi' ", "robertson, lucene, atire, bm25l, bm25+"),
        (["retriever.bm25.tokenizer=spacy"], "retriever.bm25.tokenizer='spacy' ", "sklearn, word, whitespace"),
        (["retriever.bm25.k1=-0.5"], "retriever.bm25.k1=-0.5 ", "a number >= 0"),
        (["retriever.bm25.b=1.5"], "retriever.bm25.b=1.5 ", "[0, 1]"),
        (["retriever.bm25.b=-0.1"], "retriever.bm25.b=-0.1 ", "[0, 1]"),
        (["retriever.bm25.delta=-1"], "retriever.bm25.delta=-1 ", ">= 0"),
        (["retriever.bm25.stemmer=klingon"], "retriever.bm25.stemmer='klingon' ", "english"),
        (["retriever.bm25.stopwords=xx"], "retriever.bm25.stopwords='xx' ", "null or one of en"),
        (["retriever.bm25.k1=many"], "retriever.bm25.k1='many' ", "a number >= 0"),
    ],
)
def test_a_bm25_setting_out_of_range_is_one_line_naming_it(overrides, start, allowed):
    for retriever in ("bm25", "hybrid"):
        line = only_problem(f"retriever={retriever}", *overrides)
        assert line.startswith(start) and allowed in line and "\n" not in line, line


@pytest.mark.parametrize(
    "override,start",
    [
        ("retriever.fusion=max", "retriever.fusion='max' "),
        ("retriever.rrf_k=-1", "retriever.rrf_k=-1 "),
        ("retriever.dense_weight=1.5", "retriever.dense_weight=1.5 "),
    ],
)
def test_a_fusion_setting_out_of_range_is_one_line_naming_it(override, start):
    assert only_problem("retriever=hybrid", override).startswith(start)


def test_boundaries_and_every_variant_are_allowed():
    for variant in ("robertson", "lucene", "atire", "bm25l", "bm25+"):
        assert problems(compose_cfg(["retriever=bm25", f"retriever.bm25.variant={variant}"])) == []
    edges = ["retriever.bm25.k1=0", "retriever.bm25.b=0", "retriever.bm25.stemmer=null"]
    edges += ["retriever.bm25.stopwords=null"]
    assert problems(compose_cfg(["retriever=hybrid", *edges, "retriever.dense_weight=1", "retriever.rrf_k=0"])) == []
    assert problems(compose_cfg(["retriever=bm25", "retriever.bm25.b=1", "retriever.setting=open"])) == []


def test_every_bm25_setting_enters_the_pool_key():
    examples = [Example("q", "Who?", ("x",), ("q::0",), (Document("q::0", "T", ("Text.",)),))]
    base = ["retriever=bm25"]
    keys = {
        pool_key(compose_cfg([*base, *extra]), examples)
        for extra in (
            [],
            ["retriever.bm25.variant=bm25+"],
            ["retriever.bm25.k1=1.2"],
            ["retriever.bm25.b=0.5"],
            ["retriever.bm25.delta=1"],
            ["retriever.bm25.tokenizer=word"],
            ["retriever.bm25.stopwords=null"],
            ["retriever.bm25.stemmer=porter"],
            ["retriever=hybrid"],
            ["retriever=hybrid", "retriever.fusion=weighted"],
            ["retriever=hybrid", "retriever.rrf_k=10"],
        )
    }
    assert len(keys) == 11


def empty_corpus_file(tmp_path):
    """HotpotQA fullwiki records whose paragraphs have no word the tokenizer keeps (or no paragraph at all)."""
    records = [
        {"_id": "q1", "question": "Who?", "answer": "x", "supporting_facts": [["A", 0]], "context": []},
        {"_id": "q2", "question": "What?", "answer": "y", "supporting_facts": [["B", 0]],
         "context": [["B", ["The a of, it."]]]},
    ]  # fmt: skip
    path = tmp_path / "empty.json"
    path.write_text(json.dumps([{**r, "type": "bridge", "level": "easy"} for r in records]))
    return path


def test_an_empty_corpus_is_refused_whatever_the_setting(tmp_path):
    path = empty_corpus_file(tmp_path)
    for setting in ("distractor", "open"):
        line = only_problem(
            "retriever=bm25", "dataset=hotpotqa_fullwiki", f"dataset.path={path}", f"retriever.setting={setting}",
            "retriever.embed_title=false",
        )  # fmt: skip
        assert line.startswith("retriever.bm25: the corpus is empty") and "hotpotqa_fullwiki" in line, line
    # The dense retriever has no tokenizer to find nothing: the same file is valid for it.
    assert problems(compose_cfg(["dataset=hotpotqa_fullwiki", f"dataset.path={path}"])) == []


@pytest.mark.process
@pytest.mark.parametrize(
    "args,needle",
    [
        (["retriever=bm25", "retriever.bm25.variant=okapi"], "config error: retriever.bm25.variant='okapi' is out"),
        (["retriever=hybrid", "retriever.bm25.b=2"], "config error: retriever.bm25.b=2 is out of range"),
        (["retriever=bm25", "dataset=hotpotqa_fullwiki", "EMPTY"], "config error: retriever.bm25: the corpus is empty"),
    ],
)
def test_the_command_line_exits_2_before_loading_anything(tmp_path, args, needle):
    args = [f"dataset.path={empty_corpus_file(tmp_path)}" if a == "EMPTY" else a for a in args]
    done, seconds = harness([*args, "read=false", "logger=none", f"hydra.run.dir={tmp_path / 'run'}"], REPO)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("config error:")]
    assert len(errors) == 1 and errors[0].startswith(needle), done.stderr[-2000:]
    assert seconds < 10, f"took {seconds:.1f} s"
    assert not (tmp_path / "run" / "rows.journal.jsonl").exists()
