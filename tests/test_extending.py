"""The recipes of docs/architecture.md "Extending", followed from a package outside harness/.

A temporary package ``rag_ext`` (a packer, a diversifier and a per-question metric) and a config folder of
its own, joined through ``hydra.searchpath`` and ``_target_`` exactly as a user would, run end to end by
``python -m harness``; the rows are checked against what each extension must have done.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]

PACKER = '''
from harness.core.types import Context
from harness.pack.base import Packer, PackingRequest, in_reading_order
from harness.pack.budget import addable


class MostRelevantFirst(Packer):
    """Whole snippets in order of relevance to the question, each one that fits."""

    def pack(self, request: PackingRequest) -> Context:
        chosen = []
        for i in request.relevance.argsort()[::-1]:
            snippet = request.snippets[int(i)]
            if addable([s.tokens for s in chosen], [snippet.tokens], request.budget)[0]:
                chosen.append(snippet)
        return Context(in_reading_order(chosen), request.budget, self.name, extra={"chosen": len(chosen)})
'''

DIVERSIFIER = '''
import numpy as np

from harness.diversify.base import Diversifier


class EveryOther(Diversifier):
    """Every second candidate in rank order: a stand-in for a real selector."""

    def select_indices(self, pool):
        return np.arange(0, len(pool.candidates), 2)[: self.k]
'''

METRIC = """
from harness.metrics.registry import register_metric

ANSWER_WORDS = register_metric("answer_words", higher_is_better=None, summary=True)


def answer_words(prediction, example):
    return {ANSWER_WORDS: len(prediction.split())}
"""

FORMAT = """
from harness.core.types import Document, Example
from harness.data import load_dataset
from harness.data.formats import DatasetFormat, has_keys, register_format
from harness.data.records import doc_id_for, question_id


def parse(record, ctx, *, dataset, split):
    qid = question_id(record, "qid", ctx)
    documents = tuple(
        Document(doc_id_for(qid, i), title, (text,))
        for i, (title, text) in enumerate(ctx.get(record, "passages", list))
    )
    return Example(
        question_id=qid,
        question=ctx.text(record, "ask"),
        answers=(ctx.text(record, "reply"),),
        gold_doc_ids=tuple(documents[i].doc_id for i in record["gold"]),
        documents=documents,
        hops=len(record["gold"]),
        split=split,
        dataset=dataset,
    )


TOYQA = register_format(
    DatasetFormat(
        layout="toyqa",
        looks="ToyQA: qid, ask, reply, passages ([title, text] pairs), gold (passage indices)",
        default_name="toyqa",
        parse=parse,
        id_field="qid",
        detect_record=has_keys("qid", "ask", "reply", "passages", "gold"),
    )
)


def load(**config):
    # The dataset config's _target_: importing this module registered the format.
    return load_dataset(**config)
"""

SECTION = """
from harness.report.formatting import ReportTable
from harness.report.sections import register_section


def answer_lengths(inputs):
    rows = inputs.rows
    table = rows.groupby("packer", as_index=False)["answer_words"].mean()
    return ReportTable("answer_lengths", "Answer length by packer", table, table.round(2).astype(str))


register_section("answer_lengths", answer_lengths, applies=lambda rows: "answer_words" in rows)
"""

READER = '''
from harness.backends.loading import ModelSpec
from harness.read.answers import extract_answer
from harness.read.base import Reader


class LeadWords(Reader):
    """Answers with the first ``words`` words of the context: an extractive baseline without weights.
    Prompts are rendered and counted with an offline model's tokenizer, as a real backend's would be."""

    def __init__(self, name, words=3, offline_model="smollm2", models_dir=".cache/models", **reader):
        super().__init__(name, **reader)
        self.words = int(words)
        self.spec = ModelSpec(offline_model=offline_model, models_dir=models_dir)

    @property
    def reader_id(self):
        return f"lead-words|words={self.words}"

    def load_tokenizer(self):
        return self.spec.load_tokenizer()

    def _generate(self, requests, keys):
        responses = {}
        for request, key in zip(requests, keys):
            raw = " ".join(request.context.split()[: self.words])
            responses[key] = {"answer": extract_answer(raw), "raw": raw}
        self.response_cache.put(responses)  # committed as generated: a killed run keeps them
        return responses
'''

CONFIGS = {
    "reader/lead_words.yaml": (
        "_target_: rag_ext.readers.LeadWords\nname: lead-words\nwords: 3\nprompt: ${prompt}\n"
        "cache_dir: ${paths.cache_dir}\nmodels_dir: ${paths.models_dir}\n"
    ),
    "packer/most_relevant.yaml": "_target_: rag_ext.packers.MostRelevantFirst\nname: most_relevant\n",
    "diversifier/every_other.yaml": "_target_: rag_ext.diversifiers.EveryOther\nname: every_other\nk: ${k}\n",
    "dataset/toyqa.yaml": (
        "_target_: rag_ext.formats.load\nname: toyqa\nanswer_scorer: squad\nscorers: [rag_ext.metrics.answer_words]\n"
        "path: ${oc.env:TOYQA_PATH}\nlayout: toyqa\nsample_size: null\nseed: ${seed}\n"
    ),
}


def write_extension(root: Path) -> tuple[Path, Path]:
    """The package and its config folder under ``root``; returns (package parent, config folder)."""
    package = root / "src" / "rag_ext"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    modules = {
        "packers": PACKER,
        "diversifiers": DIVERSIFIER,
        "metrics": METRIC,
        "formats": FORMAT,
        "sections": SECTION,
        "readers": READER,
    }
    for name, source in modules.items():
        (package / f"{name}.py").write_text(textwrap.dedent(source))
    conf = root / "conf"
    for name, text in CONFIGS.items():
        (conf / name).parent.mkdir(parents=True, exist_ok=True)
        (conf / name).write_text(text)
    return package.parent, conf


def write_toyqa(path: Path) -> list[dict]:
    """The packaged demo questions rewritten in the outside format: passages as [title, text] pairs."""
    demo = json.loads((REPO / "harness" / "data" / "demo" / "demo_multihop.json").read_text())
    records = []
    for record in demo:
        titles = [title for title, _ in record["context"]]
        gold = sorted({titles.index(title) for title, _ in record["supporting_facts"]})
        passages = [[title, " ".join(sentences)] for title, sentences in record["context"]]
        records.append(
            {
                "qid": record["_id"],
                "ask": record["question"],
                "reply": record["answer"],
                "passages": passages,
                "gold": gold,
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return records


def run(command: list[str], root: Path, src: Path, **env: str) -> subprocess.CompletedProcess:
    environment = dict(
        os.environ, PYTHONPATH=str(src), HARNESS_CACHE_DIR=str(root / "cache"), WANDB_MODE="disabled", **env
    )
    done = subprocess.run(
        [sys.executable, *command], cwd=REPO, env=environment, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


@pytest.mark.slow
def test_every_recipe_followed_from_outside_the_package_runs_end_to_end(tmp_path):
    src, conf = write_extension(tmp_path)
    records = write_toyqa(tmp_path / "toyqa_dev.jsonl")
    budget, k = 120, 6
    out = tmp_path / "run"
    overrides = [
        f"hydra.searchpath=[file://{conf}]",
        f"hydra.run.dir={out}",
        "dataset=toyqa",
        "reader=lead_words",
        "packer=most_relevant",
        "diversifier=every_other",
        f"budget={budget}",
        f"k={k}",
    ]
    run(["-m", "harness", *overrides], tmp_path, src, TOYQA_PATH=str(tmp_path / "toyqa_dev.jsonl"))
    rows = pd.read_parquet(out / "rows.parquet")

    # The dataset format: every record loaded, with its own ids, answers and gold passages.
    assert rows["question_id"].tolist() == [r["qid"] for r in records]
    assert [json.loads(a) for a in rows["gold_answers"]] == [[r["reply"]] for r in records]
    assert set(rows["dataset"]) == {"toyqa"} and set(rows["split"]) == {"dev"}
    assert (rows["hops"] == [len(r["gold"]) for r in records]).all()
    # The packer: within budget, its own column filled, as many snippets as it says it chose.
    assert set(rows["packer"]) == {"most_relevant"} and (rows["context_tokens"] <= budget).all()
    assert (rows["pack.chosen"] == rows["n_snippets"]).all() and (rows["n_snippets"] > 0).all()
    # The diversifier: every second candidate of the pool, at most k of them.
    assert set(rows["diversifier"]) == {"every_other"}
    assert rows["n_selected"].tolist() == [min(k, math.ceil(n / 2)) for n in rows["n_candidates"]]
    # The reader backend: its answers, from the very context each row shows, under its own id.
    assert set(rows["reader"]) == {"lead-words"}
    assert rows["raw_answer"].tolist() == [" ".join(c.split()[:3]) for c in rows["context"]]
    # The metric: a column per question, equal to what the scorer computes on the answer, in the summary too.
    assert rows["answer_words"].tolist() == [len(a.split()) for a in rows["answer"]]
    summary = json.loads((out / "summary.json").read_text())
    assert "answer_words" in json.dumps(summary)

    # The report section: imported by --import, built from the rows, written beside the built-in ones.
    report = tmp_path / "report"
    run(
        [
            "-m",
            "harness.report",
            str(out),
            "--out",
            str(report),
            "--import",
            "rag_ext.sections",
            "--no-plots",
            "--no-viewer",
            "--resamples",
            "200",
            "--quiet",
        ],
        tmp_path,
        src,
    )
    table = pd.read_csv(report / "answer_lengths.csv")
    assert table.to_dict("records") == [{"packer": "most_relevant", "answer_words": rows["answer_words"].mean()}]
    assert "## Answer length by packer" in (report / "report.md").read_text()
