"""Entry points: read a dataset file of any supported layout into canonical Examples.

Supported layouts: ``hotpotqa`` (distractor or fullwiki setting), ``musique``, ``2wiki``
(2WikiMultiHopQA), ``ircot`` (IRCoT's processed format of those three, the benchmark named by
``source``), ``demo`` (the packaged demo set, HotpotQA distractor layout), ``squad``
(SQuAD-style JSON such as COVID-QA), ``expertqa``, ``ragbench`` (RAGBench release, JSON lines or
Parquet), ``beir`` (a BEIR dataset folder) and ``dpr`` (DPR retrieval results such as NQ-Open).
With ``layout="auto"`` the layout is recognised from the path (a BEIR folder, a Parquet file), a
SQuAD-style ``{"data": [...]}`` object, or else the first record's keys. See
:mod:`harness.data.records` for how document ids are formed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from harness.core.types import Example
from harness.data import beir, dpr, expertqa, hotpotqa, ircot, musique, ragbench, squad, twowiki
from harness.data.aliases import add_answer_aliases
from harness.data.demo import demo_file
from harness.data.errors import DatasetFormatError
from harness.data.io import read_records
from harness.data.records import RecordContext, peek_id
from harness.data.sampling import check_sample_size, subsample
from harness.data.validate import RecordChecks

LAYOUTS = ("auto", "hotpotqa", "musique", "2wiki", "ircot", "demo", "squad", "expertqa", "ragbench", "beir", "dpr")
_ID_FIELDS = {
    "hotpotqa": hotpotqa.ID_FIELD,
    "demo": hotpotqa.ID_FIELD,
    "musique": musique.ID_FIELD,
    "2wiki": twowiki.ID_FIELD,
    "ircot": ircot.ID_FIELD,
    "expertqa": expertqa.ID_FIELD,
    "ragbench": ragbench.ID_FIELD,
    "dpr": dpr.ID_FIELD,
}
_DEFAULT_NAMES = {
    "musique": "musique",
    "2wiki": "2wikimultihopqa",
    "demo": "demo",
    "squad": "covidqa",
    "expertqa": "expertqa",
    "ragbench": "ragbench",
    "beir": "beir",
    "dpr": "nq_open",
}
# Layouts with rows skipped by design: record -> the reason it is skipped ("records ..."), or None.
_SKIP_REASON: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "2wiki": lambda record: None if twowiki.has_context(record) else "without 'context'",
    "expertqa": expertqa.skip_reason,
    "ragbench": ragbench.skip_reason,
}
# What makes two records the same question, where the id field does not (ExpertQA has no ids).
_IDENTITY: dict[str, tuple[Callable[[Example], Any], str, str]] = {
    "expertqa": (lambda e: (e.question, e.metadata["systems"]), "record (same question and systems)", "question"),
}
_SPLIT_WORDS = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}


def detect_layout(record: dict[str, Any], path: str | Path) -> str:
    """The layout a record's keys identify; DatasetFormatError naming the keys when none fits."""
    keys = set(record)
    if {"documents_sentences", "all_relevant_sentence_keys", "response"} <= keys:
        return "ragbench"
    if {"question", "answers", "ctxs"} <= keys:
        return "dpr"
    if {"question", "answers"} <= keys and isinstance(record.get("answers"), dict):
        return "expertqa"
    if {"paragraphs", "question_decomposition"} <= keys:
        return "musique"
    if ircot.KEYS <= keys:
        return "ircot"
    if {"_id", "supporting_facts"} <= keys:
        # 2WikiMultiHopQA adds (subject, relation, object) evidence triples to the HotpotQA fields.
        return "2wiki" if "evidences" in keys else "hotpotqa"
    raise DatasetFormatError(
        path,
        f"unknown layout: first record has keys {sorted(keys)}; expected HotpotQA "
        "(_id, supporting_facts, context), MuSiQue (id, paragraphs, question_decomposition), "
        "2WikiMultiHopQA (_id, supporting_facts, evidences, context), IRCoT (question_id, question_text, "
        "answers_objects, contexts), RAGBench (id, question, documents_sentences, "
        "all_relevant_sentence_keys, response), DPR (question, answers, ctxs) or "
        "ExpertQA (question, answers {system: ...})",
        index=0,
        record_id=peek_id(record, "_id") or peek_id(record, "id"),
    )


# What each layout looks like, for the message when layout="auto" finds one the other options do not fit.
_LOOKS = {
    "hotpotqa": "HotpotQA: _id, supporting_facts, context",
    "musique": "MuSiQue: id, paragraphs, question_decomposition",
    "2wiki": "2WikiMultiHopQA: _id, supporting_facts, evidences, context",
    "ircot": "IRCoT's processed format: question_id, question_text, answers_objects, contexts",
    "ragbench": "RAGBench: a Parquet file, or id, question, documents_sentences, all_relevant_sentence_keys, response",
    "dpr": "DPR retrieval results: question, answers, ctxs",
    "expertqa": "ExpertQA: question, answers {system: ...}",
    "squad": 'SQuAD-style: one {"data": [...]} object',
    "beir": "a BEIR folder: corpus.jsonl, queries.jsonl, qrels/",
}
# The dataset configs (conf/dataset/) of the ircot layout, which takes ``source``.
_IRCOT_CONFIGS = "dataset=hotpotqa_ircot, 2wikimultihopqa_ircot or musique_ircot"


def _check_options(layout: str, setting: str | None, source: str | None, detected_in: Path | None) -> None:
    """``setting`` and ``source`` must fit ``layout``. When ``layout="auto"`` found the layout in
    ``detected_in``, the DatasetFormatError names that file and the layout it looks like: the options
    usually come from a dataset config written for another layout, not from the user."""
    wrong = None
    if setting is not None and layout != "hotpotqa":
        wrong = f"setting={setting!r} applies to the hotpotqa layout only"
    elif source is not None and layout != "ircot":
        wrong = f"source={source!r} applies to the ircot layout only"
    if wrong is None:
        return
    if detected_in is None:
        raise ValueError(f"{wrong}, not {layout!r}")
    option = "setting" if setting is not None and layout != "hotpotqa" else "source"
    configs = f"{_IRCOT_CONFIGS}, or " if layout == "ircot" else ""
    raise DatasetFormatError(
        detected_in,
        f"layout=auto: the file looks like the {layout!r} layout ({_LOOKS.get(layout, layout)}); {wrong}, "
        f"not {layout!r} (a dataset config may set it): for this file use {configs}layout={layout!r} "
        f"with {option} unset",
    )


def split_from_filename(path: str | Path) -> str:
    """``train``/``dev``/``test`` when the file name says so (``hotpot_dev_...``), else ``test``."""
    for word in re.split(r"[^a-z]+", Path(path).name.lower()):
        if word in _SPLIT_WORDS:
            return _SPLIT_WORDS[word]
    return "test"


def load_examples(
    path: str | Path | None = None,
    layout: str = "auto",
    *,
    name: str | None = None,
    split: str | None = None,
    setting: str | None = None,
    source: str | None = None,
) -> list[Example]:
    """Every record of ``path`` as an Example, in file order.

    ``path=None`` reads the packaged demo set. ``name`` labels ``Example.dataset`` (default: the
    layout's dataset name); ``split`` defaults to the one the file name states, else ``test``;
    ``setting`` (``distractor``/``fullwiki``) applies to HotpotQA only, default ``distractor``;
    ``source`` (``hotpotqa``/``2wikimultihopqa``/``musique``) to the IRCoT layout only, the benchmark
    its file was made from (default name ``{source}_ircot``).
    Raises DatasetFormatError naming file, record and field on malformed input, a repeated question
    id included; rows skipped by design (2WikiMultiHopQA rows without ``context``, ExpertQA records
    without answers or with bare-URL evidence only, RAGBench records without relevant sentence keys)
    are counted, one warning per reason.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected one of {LAYOUTS}")
    if path is None:
        if layout not in ("auto", "demo"):
            raise ValueError(f"layout {layout!r} needs a path; only the demo set is packaged")
        with demo_file() as demo_path:
            return load_examples(demo_path, "demo", name=name, split=split, setting=setting, source=source)

    path = Path(path)
    detected = layout == "auto"
    if detected:
        layout = _layout_from_source(path) or "auto"
    if layout != "auto":
        _check_options(layout, setting, source, path if detected else None)
    ircot.check_source(source)
    if layout in ("squad", "beir"):  # whole-source layouts: not a list of per-question records
        dataset = name or (path.name if layout == "beir" else _DEFAULT_NAMES[layout])
        if layout == "beir":
            return beir.load_folder(path, dataset=dataset, split=split or "test")
        return squad.load_file(path, dataset=dataset, split=split or split_from_filename(path))
    records = ragbench.read_rows(path) if layout == "ragbench" else read_records(path)
    if layout == "auto":
        layout = detect_layout(records[0], path)
        _check_options(layout, setting, source, path)
    parse = _parser(layout, setting or "distractor", source)
    if layout == "ircot":
        dataset = name or ircot.dataset_name(source)
    else:
        dataset = name or _DEFAULT_NAMES.get(layout) or ("hotpotqa_fullwiki" if setting == "fullwiki" else "hotpotqa")
    split = split or split_from_filename(path)
    id_field = _ID_FIELDS[layout]

    examples: list[Example] = []
    checks = RecordChecks(path)
    skip_reason = _SKIP_REASON.get(layout)
    identity, what, identity_field = _IDENTITY.get(layout, (lambda e: e.question_id, "question id", id_field))
    for index, record in enumerate(records):
        ctx = RecordContext(path, index, peek_id(record, id_field) if id_field else None)
        reason = skip_reason(record) if skip_reason is not None else None
        if reason is not None:
            checks.skip(reason)
            continue
        example = parse(record, ctx, dataset=dataset, split=split)
        checks.unique(identity(example), ctx, identity_field, what=what)
        examples.append(example)
    checks.finish(len(records), len(examples))
    return examples


def _layout_from_source(path: Path) -> str | None:
    """The layout a path itself shows: a BEIR folder, a Parquet file, or a SQuAD-style object."""
    if path.is_dir():
        return "beir" if beir.is_beir_folder(path) else None
    if path.suffix == ".parquet":
        return "ragbench"
    if not path.is_file():
        return None
    with path.open("rb") as handle:
        # Only sniffing: a bad byte here is reported, with its offset, by the loader that reads the file.
        head = handle.read(4096).decode("utf-8-sig", errors="replace").lstrip()
    # SQuAD files are one object whose first key is "data" or "version"; JSON lines start with a record.
    return "squad" if re.match(r'\{\s*"(data|version)"\s*:', head) else None


def _parser(layout: str, setting: str, source: str | None = None) -> Callable[..., Example]:
    if layout in ("hotpotqa", "demo"):
        return partial(hotpotqa.parse_record, setting=setting if layout == "hotpotqa" else "distractor")
    if layout == "ircot":
        return partial(ircot.parse_record, source=source)
    parsers = {
        "musique": musique.parse_record,
        "2wiki": twowiki.parse_record,
        "expertqa": expertqa.parse_record,
        "ragbench": ragbench.parse_record,
        "dpr": dpr.parse_record,
    }
    return parsers[layout]


def load_dataset(
    path: str | Path | None = None,
    layout: str = "auto",
    sample_size: int | None = None,
    seed: int = 0,
    name: str | None = None,
    *,
    split: str | None = None,
    setting: str | None = None,
    source: str | None = None,
    aliases: str | Path | None = None,
) -> list[Example]:
    """Examples of a dataset file, optionally a reproducible subsample of at most ``sample_size``
    (:func:`harness.data.sampling.subsample`: drawn with ``seed``, in file order). A relative
    ``path`` is taken from the directory the program was started in, also under Hydra (which may
    change the working directory). ``path=None`` is the packaged demo set. ``aliases``: 2WikiMultihopQA's
    ``id_aliases.json``, whose aliases and demonyms of each record's ``answer_id`` become further gold
    answers, as in the official evaluator (:mod:`harness.data.aliases`).
    """
    check_sample_size(sample_size)  # before reading: a bad size fails at once
    if path is not None:
        path = _absolute(path)
    examples = load_examples(path, layout, name=name, split=split, setting=setting, source=source)
    examples = add_answer_aliases(examples, None if aliases is None else _absolute(aliases))
    return subsample(examples, sample_size, seed)


def _absolute(path: str | Path) -> Path:
    # Hydra may run the job in its own directory; paths in configs mean the launch directory.
    from hydra.utils import to_absolute_path

    return Path(to_absolute_path(str(path)))
