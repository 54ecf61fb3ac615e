"""Cache identity and integrity, in process: keys follow code, content and config (never paths), pools
round-trip through a data-only file, and damaged cache files are moved aside and never used."""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import shutil
import sqlite3
import stat
from pathlib import Path

import numpy as np
import pytest

from harness.cache import ArrayStore, CacheAccessError, TextStore, fingerprint, stage_code
from harness.cache.pools import PoolCache, pool_key, pools_from_arrays, pools_to_arrays
from harness.core.types import Document, Example
from harness.data.load import load_dataset
from harness.perturb.inject import NearDuplicateInjection
from harness.retrieve.dense import DenseRetriever
from tests.conftest import REPO, HashEncoder, compose_cfg


def demo_pools(setting: str = "distractor", rho: float = 0.3):
    """Real pools of the packaged demo set: dense retrieval (stand-in encoder) plus injected copies."""
    examples = load_dataset(None, "demo")
    encoder = HashEncoder(dim=8)
    pools = DenseRetriever(encoder, setting=setting).retrieve(examples)
    pools = NearDuplicateInjection(rho=rho).apply(pools, encoder, 7)
    retrieval = [{"recall_at_k": 0.5 + i / 100, "all_gold_at_k": float(i % 2)} for i in range(len(pools))]
    return examples, pools, retrieval


def assert_same_pools(left, right) -> None:
    assert len(left) == len(right)
    for a, b in zip(left, right, strict=False):
        # Example equality skips metadata (compare=False), so it is checked on its own.
        assert a.example == b.example and a.example.metadata == b.example.metadata
        assert a.candidates == b.candidates
        assert a.embeddings.dtype == b.embeddings.dtype and np.array_equal(a.embeddings, b.embeddings)
        assert a.query_embedding.dtype == b.query_embedding.dtype
        assert np.array_equal(a.query_embedding, b.query_embedding)


# ---- data-only pool entries -------------------------------------------------------------------------


def test_pools_round_trip_through_the_data_only_file(tmp_path):
    _, pools, retrieval = demo_pools()
    assert any(c.kind == "copy" for p in pools for c in p.candidates)  # the perturbation really ran
    store = PoolCache(tmp_path)
    path = Path(store.save("k", pools, retrieval))
    assert path == tmp_path / "pools" / "k.npz" and path.exists()
    loaded, loaded_retrieval = store.load("k")
    assert_same_pools(pools, loaded)
    assert loaded_retrieval == retrieval
    # Tuples stay tuples (hashable ids, sentence tuples), not JSON lists.
    assert isinstance(loaded[0].candidates[0].source_ids, tuple)
    assert isinstance(loaded[0].example.documents[0].sentences, tuple)


def test_a_corpus_shared_by_reference_is_stored_once_and_stays_shared():
    corpus = tuple(Document(f"d{i}", f"T{i}", (f"Sentence {i}.",)) for i in range(5))
    examples = [
        Example(f"q{i}", f"Question {i}?", (f"a{i}",), ("d1",), corpus, metadata={"qrels": {"d1": 1}, "ids": (1, 2)})
        for i in range(3)
    ]
    encoder = HashEncoder(dim=4)
    pools = DenseRetriever(encoder, setting="open", pool_size=3).retrieve(examples)
    arrays = pools_to_arrays(pools, [{} for _ in pools])
    assert arrays["meta"].tobytes().decode().count('"doc_id"') == len(corpus)  # one copy, not one per question
    loaded, _ = pools_from_arrays(arrays)
    assert_same_pools(pools, loaded)
    assert loaded[0].example.documents is loaded[2].example.documents
    assert loaded[0].example.metadata == {"qrels": {"d1": 1}, "ids": (1, 2)}


def test_a_planted_pickle_is_never_loaded(tmp_path, caplog):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    store = PoolCache(tmp_path)
    store.dir.mkdir(parents=True)
    store.path("k").write_bytes(pickle.dumps(Payload()))
    (store.dir / "k.pkl").write_bytes(pickle.dumps(Payload()))  # the old layout's name
    with caplog.at_level(logging.WARNING):
        assert store.load("k") is None
    assert not marker.exists()
    assert not store.path("k").exists(), "the planted file must be moved aside, not left to be tried again"
    assert list(store.dir.glob("k.npz.corrupt-*"))
    assert str(store.path("k")) in caplog.text


@pytest.mark.parametrize("damage", ["truncated", "garbage", "wrong counts"])
def test_a_damaged_pool_entry_is_logged_moved_aside_and_not_used(tmp_path, caplog, damage):
    _, pools, retrieval = demo_pools()
    store = PoolCache(tmp_path)
    path = Path(store.save("k", pools, retrieval))
    if damage == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(os.urandom(4096))
    else:
        arrays = pools_to_arrays(pools, retrieval)
        arrays["offsets"] = arrays["offsets"][:-1]
        np.savez(path, **arrays)
    with caplog.at_level(logging.WARNING):
        assert store.load("k") is None
    assert str(path) in caplog.text
    assert not path.exists() and len(list(store.dir.glob("k.npz.corrupt-*"))) == 1


def test_an_entry_written_under_another_key_is_refused(tmp_path, caplog):
    _, pools, retrieval = demo_pools()
    store = PoolCache(tmp_path)
    other = Path(store.save("other-key", pools, retrieval))
    shutil.copyfile(other, store.path("k"))  # the same bytes under this key's name
    with caplog.at_level(logging.WARNING):
        assert store.load("k") is None
    assert "written for key 'other-key'" in caplog.text and str(store.path("k")) in caplog.text
    assert not store.path("k").exists() and store.load("other-key") is not None


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_pool_files_follow_the_process_umask(tmp_path, umask):
    _, pools, retrieval = demo_pools()
    old = os.umask(umask)
    try:
        path = Path(PoolCache(tmp_path).save("k", pools, retrieval))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_an_unreadable_pool_entry_is_an_access_error_and_stays_in_place(tmp_path):
    store = PoolCache(tmp_path)
    store.path("k").mkdir(parents=True)  # not a file we can read (root reads any mode, so no chmod here)
    with pytest.raises(CacheAccessError, match=r"pool cache entry .*k\.npz"):
        store.load("k")
    assert store.path("k").is_dir() and not list(store.dir.glob("*.corrupt-*"))


def test_a_value_stored_under_another_key_fails_its_check(tmp_path, caplog):
    texts = TextStore(tmp_path / "t.sqlite", table="t")
    texts.put_texts({"a": {"answer": "Paris"}, "b": {"answer": "Rome"}})
    texts.put_many({"b": texts.get_many(["a"])["a"]})  # a's sealed value planted under b
    with caplog.at_level(logging.WARNING):
        assert texts.get_texts(["a", "b"]) == {"a": {"answer": "Paris"}}
    assert "stored under another key" in caplog.text
    assert len(texts) == 1  # the planted value is deleted, so the recomputed one can take its place
    texts.put_texts({"b": {"answer": "Rome"}})
    assert texts.get_texts(["b"]) == {"b": {"answer": "Rome"}}


# ---- keys -------------------------------------------------------------------------------------------


def test_pool_key_follows_content_not_ids_or_paths():
    examples = load_dataset(None, "demo")
    cfg = compose_cfg()
    key = pool_key(cfg, examples)
    moved = compose_cfg(
        [
            "paths.cache_dir=/elsewhere/cache",
            "paths.models_dir=/elsewhere/models",
            "read_chunk=3",
            "cache.force=true",
            "logger=none",
            "+retriever.encoder.show_progress=false",
        ]
    )
    assert pool_key(moved, examples) == key

    first = examples[0]
    doc = first.documents[0]
    edits = {
        "question": dataclasses.replace(first, question=first.question + " (corrected)"),
        "answer": dataclasses.replace(first, answers=("another answer",)),
        "context": dataclasses.replace(
            first,
            documents=(dataclasses.replace(doc, sentences=doc.sentences[:-1] + ("Edited.",)),) + first.documents[1:],
        ),
        "metadata": dataclasses.replace(first, metadata={**first.metadata, "note": 1}),
    }
    keys = {name: pool_key(cfg, [edited, *examples[1:]]) for name, edited in edits.items()}
    assert len(set(keys.values()) | {key}) == len(edits) + 1, keys
    for override in ("k=3", "seed=1", "perturb=inject", "retriever.pool_size=4", "reranker=bge_v2_m3"):
        assert pool_key(compose_cfg([override]), examples) != key, override
    # Budget, packer, diversifier and reader do not change the pools.
    for override in ("budget=96", "packer=submod", "diversifier=mmr", "reader.max_new_tokens=8"):
        assert pool_key(compose_cfg([override]), examples) == key, override


def test_identity_config_has_no_paths_and_no_runtime_keys():
    cfg = compose_cfg(["paths.cache_dir=/a/cache", "paths.models_dir=/a/models"])
    other = compose_cfg(["paths.cache_dir=/b/cache", "paths.models_dir=/b/models", "read_chunk=1", "logger=none"])
    ident = fingerprint.identity_config(cfg)
    assert ident == fingerprint.identity_config(other)
    assert not {"paths", "logger", "read_chunk", "cache"} & set(ident)
    assert "cache_dir" not in ident["retriever"]["encoder"] and "cache_dir" not in ident["reader"]
    # A path built from a root keeps its place-independent form, so it still tells models apart.
    assert ident["reader"]["pretrained"] == "<models_dir>/SmolLM2-135M-Instruct"
    assert fingerprint.identity_config(compose_cfg(["budget=96"])) != ident


def test_input_files_digest_follows_the_bytes_of_the_dataset_file(tmp_path):
    data = tmp_path / "d.json"
    data.write_text('[{"a": 1}]')
    first = fingerprint.input_files_digest({"path": str(data), "layout": "auto"})
    assert fingerprint.input_files_digest({"path": str(data), "layout": "auto"}) == first
    data.write_text('[{"a": 2}]')
    assert fingerprint.input_files_digest({"path": str(data), "layout": "auto"}) != first
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "qrels" / "test.tsv").write_text("q\td\t1\n")
    before = fingerprint.input_files_digest({"path": str(folder)})
    (folder / "qrels" / "test.tsv").write_text("q\td\t0\n")
    assert fingerprint.input_files_digest({"path": str(folder)}) != before


def test_a_settled_dataset_file_is_digested_once_per_process_until_it_changes(tmp_path, monkeypatch):
    data = tmp_path / "d.json"
    data.write_text('[{"a": 1}]')
    settled = data.stat().st_mtime_ns - 10**10
    os.utime(data, ns=(settled, settled))
    reads: list[Path] = []
    digest_file = fingerprint._file_digest
    monkeypatch.setattr(
        fingerprint, "_file_digest", lambda path, digest: (reads.append(path), digest_file(path, digest))
    )
    first = fingerprint.input_files_digest({"path": str(data)})
    assert fingerprint.input_files_digest({"path": str(data)}) == first
    assert reads == [data]  # the second job's look-up read nothing
    data.write_text('[{"a": 2}]')  # same size, modified just now: digested afresh
    assert fingerprint.input_files_digest({"path": str(data)}) != first
    assert len(reads) == 2


def test_stage_fingerprints_cover_imports_and_exclude_analysis_code():
    rel = {
        stage: {p.relative_to(fingerprint.PACKAGE_DIR).as_posix() for p in fingerprint.stage_files(stage)}
        for stage in ("pools", "tree", "read", "run")
    }
    # Transitive imports: the pool stage reads datasets through harness/data, which the key must cover.
    assert {
        "run/pools.py",
        "retrieve/dense.py",
        "perturb/inject.py",
        "data/hotpotqa.py",
        "data/demo/demo_multihop.json",
        "metrics/retrieval.py",
        "core/types.py",
    } <= rel["pools"]
    assert {"tree/raptor.py", "lm/base.py"} <= rel["tree"]
    # Loaders, trees and the reader split, chunk and count text through harness/text.
    assert {"text/sentences.py", "text/chunking.py", "text/tokens.py"} <= rel["pools"]
    assert {"text/sentences.py", "text/tokens.py"} <= rel["tree"] and "text/tokens.py" in rel["read"]
    # A stage is its folder: every file in harness/read/, nothing of retrieval or packing.
    assert {
        p.relative_to(fingerprint.PACKAGE_DIR).as_posix() for p in (fingerprint.PACKAGE_DIR / "read").glob("*.py")
    } <= rel["read"]
    assert not any(p.startswith(("retrieve/", "pack/")) for p in rel["read"])
    # The pool stage declares the packages it reaches through config _target_s: every module of them.
    for package in ("data", "retrieve", "perturb"):
        assert {f"{package}/{p.name}" for p in (fingerprint.PACKAGE_DIR / package).glob("*.py")} <= rel["pools"]
    for stage in ("pools", "tree", "read", "run"):
        # Analysis, sinks and cache storage (SQLite or PostgreSQL) never change what a stage computes.
        assert not any(p.startswith(("report/", "runlog/", "stats/", "cache/")) for p in rel[stage]), stage
    assert {"run/pipeline.py", "pack/submod.py", "diversify/mmr.py", "read/server.py"} <= rel["run"]
    assert "cli.py" not in rel["run"]


def test_fingerprint_changes_with_any_byte_of_a_covered_file(tmp_path, monkeypatch):
    package = tmp_path / "harness"
    (package / "stage").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "stage" / "__init__.py").write_text("")
    (package / "stage" / "a.py").write_text("from harness.helper import f\n")
    (package / "helper.py").write_text("def f():\n    return 1\n")
    (package / "report.py").write_text("X = 1\n")
    monkeypatch.setattr(stage_code, "PACKAGE_DIR", package)

    def fp() -> str:
        return stage_code.stage_fingerprint("stage")

    first = fp()
    (package / "report.py").write_text("X = 2\n")
    assert fp() == first  # not imported by the stage
    (package / "helper.py").write_text("def f():\n    return 2\n")
    second = fp()
    assert second != first  # imported by the stage
    (package / "helper.py").write_text("def f():\n    return 2  # a comment is an edit too\n")
    assert fp() != second


# ---- damaged SQLite files ---------------------------------------------------------------------------


def filled_store(path: Path) -> None:
    store = TextStore(path, table="responses")
    store.put_texts({f"k{i}": {"answer": "x" * 200, "i": i} for i in range(2000)})
    store.close()
    # Fold the write-ahead log into the main file, so damage to the file is damage to the data.
    conn = sqlite3.connect(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


@pytest.mark.parametrize("damage", ["truncated", "garbage", "garbage page"])
def test_a_damaged_sqlite_file_is_moved_aside_and_started_afresh(tmp_path, caplog, damage):
    path = tmp_path / "responses.sqlite"
    filled_store(path)
    size = path.stat().st_size
    if damage == "truncated":
        with open(path, "r+b") as handle:
            handle.truncate(size // 2)
    elif damage == "garbage":
        path.write_bytes(os.urandom(size))
    else:
        with open(path, "r+b") as handle:
            handle.seek(4096 * 3)
            handle.write(os.urandom(4096))
    with caplog.at_level(logging.WARNING):
        store = TextStore(path, table="responses")
        found = store.get_texts([f"k{i}" for i in range(2000)])
    # Nothing from the damaged file is served (its entries are recomputed by their callers).
    assert found == {}
    assert str(path) in caplog.text
    moved = list(tmp_path.glob("responses.sqlite.corrupt-*"))
    assert len(moved) == 1
    store.put_texts({"new": {"answer": "y"}})
    assert store.get_texts(["new"]) == {"new": {"answer": "y"}} and len(store) == 1


def test_a_healthy_store_is_not_touched(tmp_path):
    path = tmp_path / "responses.sqlite"
    filled_store(path)
    store = TextStore(path, table="responses")
    assert len(store.get_texts([f"k{i}" for i in range(2000)])) == 2000
    assert not list(tmp_path.glob("*.corrupt-*"))


def flip_byte(store, key: str, position: int = 3) -> None:
    value = bytearray(store.get_many([key])[key])
    value[position] ^= 0x01
    store.put_many({key: bytes(value)})


def test_damaged_values_are_skipped_not_served(tmp_path, caplog):
    texts = TextStore(tmp_path / "t.sqlite", table="t")
    texts.put_texts({"good": {"answer": "Paris"}, "flipped": {"answer": "Paris"}})
    flip_byte(texts, "flipped", position=13)  # '"answer": "Paris"' -> '"answer": "Qaris"': still valid JSON
    arrays = ArrayStore(tmp_path / "a.sqlite", table="a")
    arrays.put_arrays({"good": np.ones(4, np.float32), "flipped": np.ones(4, np.float32)})
    flip_byte(arrays, "flipped")  # a float that is still a float, only wrong
    with caplog.at_level(logging.WARNING):
        assert texts.get_texts(["good", "flipped"]) == {"good": {"answer": "Paris"}}
        found = arrays.get_arrays(["good", "flipped"])
    assert list(found) == ["good"] and np.array_equal(found["good"], np.ones(4, np.float32))
    assert str(tmp_path / "t.sqlite") in caplog.text and str(tmp_path / "a.sqlite") in caplog.text
    assert "flipped" in caplog.text


# The reader's response keys hold the "read" fingerprint (tests/test_read_model_spec.py checks that).
KEYS_SCRIPT = """
import json
from harness.cache.fingerprint import code_fingerprint
print(json.dumps({s: code_fingerprint(s) for s in ("read", "pools", "tree", "lm", "run")}))
"""


@pytest.mark.process
def test_each_key_follows_the_code_it_depends_on(tmp_path):
    """Edits in a copied package, keys computed by a fresh interpreter on the copy each time."""
    import json
    import shutil
    import subprocess
    import sys

    shutil.copytree(REPO / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))

    def keys() -> dict[str, str]:
        out = subprocess.run(
            [sys.executable, "-c", KEYS_SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    def edit(module: str) -> dict[str, str]:
        with open(tmp_path / "harness" / module, "a") as handle:
            handle.write("\n# edited\n")
        return keys()

    def changed(before: dict, after: dict) -> set[str]:
        return {name for name in before if before[name] != after[name]}

    base = keys()
    after_report = edit("report/tables.py")
    assert changed(base, after_report) == set()
    after_sinks = edit("runlog/outputs.py")  # how a run's rows are written never changes them
    assert changed(after_report, after_sinks) == set()
    after_retrieval = edit("retrieve/dense.py")
    # Answers depend on generation code only; trees embed leaves through the retriever's document view.
    assert changed(after_sinks, after_retrieval) == {"pools", "tree", "run"}
    after_generation = edit("backends/loading.py")  # model loading, shared by the reader and the local LM
    assert changed(after_retrieval, after_generation) == {"read", "lm", "tree", "run"}
    after_packer = edit("pack/submod.py")
    assert changed(after_generation, after_packer) == {"run"}


def test_a_cache_file_that_cannot_be_opened_is_named(tmp_path):
    # A folder where the SQLite file should be: sqlite says only "unable to open database file".
    (tmp_path / "responses.sqlite").mkdir()
    with pytest.raises(OSError, match=r"cache file .*responses\.sqlite: unable to open database file"):
        TextStore(tmp_path / "responses.sqlite", table="responses")
    assert (tmp_path / "responses.sqlite").is_dir()  # not mistaken for damage and moved aside
