"""BM25 through bm25s (term scores precomputed into a sparse matrix): its settings, the tokenizer, the index
and the on-disk cache of an open corpus's index.

Settings (``retriever.bm25.*``): the ``variant`` (bm25s's method: the idf and term-frequency forms of
Kamphuis et al., 2020), ``k1``, ``b``, ``delta`` (BM25L and BM25+ only), the ``tokenizer`` (a regular
expression over the lowercased text), ``stopwords`` (a bm25s list, or null) and ``stemmer`` (a Snowball
algorithm of PyStemmer, or null). Stopwords are removed before stemming, as bm25s does.

An index is built from token lists and scores every document for a query; an open corpus's index is kept in
``bm25.sqlite`` under the cache folder (as the embeddings are in ``embeddings.sqlite``), keyed by the settings,
the library versions, this module's code and the indexed texts. An entry is bm25s's own saved files packed
into one npz read without pickle: data only.

Nothing heavy is imported at module level: the config check validates settings with :func:`settings_problems`
before anything loads.
"""

from __future__ import annotations

import io
import logging
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from harness.cache import CheckedStore, stable_hash
from harness.cache.fingerprint import code_fingerprint
from harness.core.values import is_number

log = logging.getLogger(__name__)

VARIANTS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
# Token patterns, applied to the lowercased text: scikit-learn's CountVectorizer default (words of two or more
# letters or digits, bm25s's default too), every word, or whitespace-separated strings.
TOKENIZERS = {"sklearn": r"(?u)\b\w\w+\b", "word": r"(?u)\b\w+\b", "whitespace": r"\S+"}
# The stopword lists bm25s ships, by language code.
STOPWORDS = ("en", "en_plus", "de", "nl", "fr", "es", "pt", "it", "ru", "sv", "no", "zh", "tr", "ko")
# Said when no document of a corpus has a word the tokenizer keeps: every score would be 0.
EMPTY_CORPUS = "the corpus is empty: no document of any question has a word the BM25 tokenizer keeps"
# Scores in double precision: the ranking of near-equal documents does not hang on float32 rounding.
DTYPE = "float64"


@cache
def stemmers() -> tuple[str, ...]:
    """PyStemmer's algorithms (``english``, ``porter``, ...)."""
    import Stemmer

    return tuple(Stemmer.algorithms())


def settings_problems(node: Mapping[str, Any], prefix: str = "retriever.bm25") -> list[str]:
    """One line per invalid BM25 setting of ``node``, naming the key; empty when all are valid."""
    checks = (
        ("variant", lambda v: v in VARIANTS, f"one of {', '.join(VARIANTS)}"),
        ("k1", lambda v: is_number(v) and v >= 0, "a number >= 0 (term-frequency saturation)"),
        ("b", lambda v: is_number(v) and 0 <= v <= 1, "a number in [0, 1] (length normalisation)"),
        ("delta", lambda v: is_number(v) and v >= 0, "a number >= 0 (BM25L and BM25+ only)"),
        ("tokenizer", lambda v: v in TOKENIZERS, f"one of {', '.join(TOKENIZERS)}"),
        ("stopwords", lambda v: v is None or v in STOPWORDS, f"null or one of {', '.join(STOPWORDS)}"),
        ("stemmer", lambda v: v is None or v in stemmers(), f"null or a PyStemmer algorithm ({', '.join(stemmers())})"),
    )
    found = []
    for key, ok, allowed in checks:
        if key not in node:
            found.append(f"{prefix}.{key} is missing; allowed: {allowed}")
        elif not ok(node[key]):
            found.append(f"{prefix}.{key}={node[key]!r} is out of range; allowed: {allowed}")
    unknown = sorted(set(node) - {key for key, _, _ in checks})
    if unknown:
        found.append(f"{prefix}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(k for k, _, _ in checks)}")
    return found


@dataclass(frozen=True)
class BM25Settings:
    variant: str = "lucene"
    k1: float = 1.5
    b: float = 0.75
    delta: float = 0.5
    tokenizer: str = "sklearn"
    stopwords: str | None = "en"
    stemmer: str | None = "english"

    @classmethod
    def of(cls, node: Mapping[str, Any] | None) -> BM25Settings:
        """The settings of a config node (every key required); ValueError naming each invalid key."""
        values = dict(node or {})
        problems = settings_problems(values)
        if problems:
            raise ValueError("; ".join(problems))
        return cls(**values)

    def identity(self) -> dict[str, Any]:
        """The settings and the versions of the libraries that compute with them (cache keys)."""
        return {**asdict(self), "bm25s": version("bm25s"), "PyStemmer": version("PyStemmer")}


def tokenize(settings: BM25Settings, texts: Sequence[str]) -> list[list[str]]:
    """Each text as the tokens BM25 counts: lowercased, split by the tokenizer's pattern, stopwords removed,
    stemmed."""
    import bm25s
    import Stemmer

    if not texts:
        return []
    stemmer = Stemmer.Stemmer(settings.stemmer) if settings.stemmer else None
    tokens = bm25s.tokenize(
        list(texts),
        lower=True,
        token_pattern=TOKENIZERS[settings.tokenizer],
        stopwords=settings.stopwords or [],
        stemmer=stemmer,
        return_ids=False,
        show_progress=False,
    )
    return [list(t) for t in tokens]


class BM25Index:
    """A bm25s index over token lists; ``scores`` rates every document for a query. A corpus without a
    single token has no index and scores 0 everywhere."""

    def __init__(self, model, n_docs: int) -> None:
        self.model = model  # bm25s.BM25, or None for a corpus without tokens
        self.n_docs = n_docs

    @classmethod
    def build(cls, settings: BM25Settings, corpus_tokens: Sequence[Sequence[str]]) -> BM25Index:
        import bm25s

        if not any(corpus_tokens):
            return cls(None, len(corpus_tokens))
        model = bm25s.BM25(
            k1=settings.k1, b=settings.b, delta=settings.delta, method=settings.variant, dtype=DTYPE, backend="numpy"
        )
        model.index([list(t) for t in corpus_tokens], show_progress=False)
        return cls(model, len(corpus_tokens))

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """The score of every document for the query's tokens (a repeated token counts each time, a token
        outside the corpus's vocabulary not at all)."""
        if self.model is None:
            return np.zeros(self.n_docs, dtype=np.float64)
        ids = self.model.get_tokens_ids(list(query_tokens))
        return np.asarray(self.model.get_scores_from_ids(ids), dtype=np.float64)

    def to_bytes(self) -> bytes:
        """bm25s's saved files, one uint8 array each, in one npz (data only)."""
        if self.model is None:
            raise ValueError("a corpus without tokens has no index to store")
        with tempfile.TemporaryDirectory() as folder:
            self.model.save(folder, show_progress=False)
            files = {p.name: np.frombuffer(p.read_bytes(), dtype=np.uint8) for p in Path(folder).iterdir()}
        buffer = io.BytesIO()
        np.savez(buffer, **files)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, n_docs: int) -> BM25Index:
        import bm25s

        with np.load(io.BytesIO(data), allow_pickle=False) as npz, tempfile.TemporaryDirectory() as folder:
            for name in npz.files:
                (Path(folder) / name).write_bytes(npz[name].tobytes())
            model = bm25s.BM25.load(folder, show_progress=False)
        if int(model.scores["num_docs"]) != n_docs:
            raise ValueError(f"the stored index holds {model.scores['num_docs']} documents, not {n_docs}")
        return cls(model, n_docs)


def index_key(settings: BM25Settings, texts: Sequence[str]) -> str:
    """What an open corpus's index is computed from: the settings, library versions, this module's code and
    every indexed text in order."""
    return stable_hash("bm25-index", settings.identity(), code_fingerprint("bm25"), stable_hash(list(texts)))


def corpus_index(settings: BM25Settings, texts: Sequence[str], cache_dir: str | None) -> BM25Index:
    """The index of an open corpus: from ``<cache_dir>/bm25.sqlite`` when an entry was stored for these texts
    and settings, else tokenized, built (and stored). An entry that fails its checksum or does not load is logged and
    rebuilt, and the rebuilt index replaces it."""
    store = CheckedStore(Path(cache_dir) / "bm25.sqlite", table="bm25") if cache_dir else None
    key = index_key(settings, texts) if store is not None else ""
    if store is not None:
        found = store.get_payloads([key], "BM25 index").get(key)
        if found is not None:
            try:
                return BM25Index.from_bytes(found, len(texts))
            except Exception as exc:  # noqa: BLE001 - any damage means the same: rebuild it
                log.warning("BM25 index %s in %s is unusable (%s); rebuilding it", key, store.path, exc)
    index = BM25Index.build(settings, tokenize(settings, texts))
    if store is not None and index.model is not None:
        store.put_payloads({key: index.to_bytes()})
    return index
