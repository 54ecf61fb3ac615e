"""Cache identity and integrity through real runs (``python -m harness`` subprocesses on the demo set):
code edits, edited dataset files, a moved cache, planted pickles, damaged cache files, concurrent runs."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import EMBEDDINGS_ENV, REPO, TINY_READER

pytestmark = pytest.mark.slow

DEMO = REPO / "harness" / "data" / "demo" / "demo_multihop.json"
MODELS = REPO / ".cache" / "models"


def copy_source(target: Path) -> Path:
    """A private copy of the package and its configs: runs see code that nothing else edits meanwhile."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "harness", target / "harness", ignore=ignore)
    shutil.copytree(REPO / "conf", target / "conf", ignore=ignore)
    return target


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return copy_source(tmp_path_factory.mktemp("source"))


def command(run_dir: Path, *overrides: str, read: bool = False) -> list[str]:
    return [
        sys.executable,
        "-m",
        "harness",
        f"read={str(read).lower()}",
        "logger=none",
        f"hydra.run.dir={run_dir}",
        *overrides,
    ]


def environment(cache: Path, own_embeddings: bool = True) -> dict[str, str]:
    """Every store of a run in ``cache``, embeddings included unless ``own_embeddings`` is false: then the
    encoders' vectors come from the suite's shared folder (for tests whose assertions are about other stores;
    loading the encoder and embedding the demo set afresh is 3 s of a run's 7)."""
    inherited = {k: v for k, v in os.environ.items() if k != EMBEDDINGS_ENV or not own_embeddings}
    return {**inherited, "HARNESS_CACHE_DIR": str(cache), "HARNESS_MODELS_DIR": str(MODELS), "WANDB_MODE": "disabled"}


def run(cache: Path, run_dir: Path, *overrides: str, cwd: Path, read: bool = False, own_embeddings: bool = True) -> str:
    proc = subprocess.run(
        command(run_dir, *overrides, read=read),
        cwd=cwd,
        env=environment(cache, own_embeddings),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    return output


def pool_files(cache: Path) -> list[Path]:
    return sorted((cache / "pools").glob("*.npz"))


def rows(run_dir: Path) -> pd.DataFrame:
    frame = pd.read_parquet(run_dir / "rows.parquet")
    # Where the cache lives is recorded in the row's config columns, and it is all that may differ.
    where = [c for c in frame.columns if c.startswith("cfg.paths.") or c.endswith("cache_dir") or c == "cfg.cache.url"]
    return frame.drop(columns=where)


def counters(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())["counters"]


def test_a_stage_edit_recomputes_pools_and_a_report_edit_reuses_them(tmp_path):
    src = copy_source(tmp_path / "src")
    cache = tmp_path / "cache"

    out = run(cache, tmp_path / "r1", cwd=src, own_embeddings=False)
    [entry] = pool_files(cache)
    stamp = entry.stat().st_mtime_ns

    with open(src / "harness" / "report" / "tables.py", "a") as handle:
        handle.write("\n# analysis code: not part of any cache key\n")
    out = run(cache, tmp_path / "r2", cwd=src, own_embeddings=False)
    assert pool_files(cache) == [entry] and entry.stat().st_mtime_ns == stamp
    assert f"pools: reusing {entry}" in out

    with open(src / "harness" / "perturb" / "inject.py", "a") as handle:
        handle.write("\n# a stage module changed (a comment counts: files are hashed byte for byte)\n")
    out = run(cache, tmp_path / "r3", cwd=src, own_embeddings=False)
    assert len(pool_files(cache)) == 2 and "pools: reusing" not in out
    pd.testing.assert_frame_equal(rows(tmp_path / "r1"), rows(tmp_path / "r3"))


def edit_demo(path: Path) -> None:
    records = json.loads(path.read_text())
    first = records[0]
    first["question"] = 'In which harbour town was the keeper who wrote "Salt Ledger" born?'
    first["answer"] = "Port Quillan"
    for title, sentences in first["context"]:
        if title == "Orla Venn":
            sentences[1] = (
                "She was born in the harbour town of Port Quillan and joined the lighthouse service at nineteen."
            )
        if title == "Salt Ledger":
            sentences[0] = "Salt Ledger is a 1933 memoir by the harbour keeper Orla Venn of Port Quillan."
    path.write_text(json.dumps(records))


def test_a_moved_cache_is_reused_and_an_edited_dataset_file_is_not_replayed(tmp_path, source):
    data = tmp_path / "data" / "demo.json"
    data.parent.mkdir()
    shutil.copy(DEMO, data)
    dataset = [f"dataset.path={data}", "dataset.layout=demo"]
    first_cache, moved_cache = tmp_path / "cache_a", tmp_path / "shared" / "cache_b"

    run(first_cache, tmp_path / "r1", *dataset, cwd=source)
    [entry] = pool_files(first_cache)
    moved_cache.parent.mkdir()
    shutil.move(first_cache, moved_cache)

    out = run(moved_cache, tmp_path / "r2", *dataset, cwd=source)
    assert pool_files(moved_cache) == [moved_cache / "pools" / entry.name]
    assert "pools: reusing" in out and counters(tmp_path / "r2")["encoder_texts_computed"] == 0
    pd.testing.assert_frame_equal(rows(tmp_path / "r1"), rows(tmp_path / "r2"))
    # The finished run is recognised from the moved cache too: same key, nothing recomputed.
    out = run(moved_cache, tmp_path / "r1", *dataset, cwd=source)
    assert "already finished" in out

    edit_demo(data)
    run(moved_cache, tmp_path / "r1", *dataset, cwd=source)  # same run folder: the changed file must not be skipped
    assert len(pool_files(moved_cache)) == 2
    fresh = pd.read_parquet(tmp_path / "r1" / "rows.parquet").set_index("question_id")
    assert fresh.loc["demo-01", "question"].startswith("In which harbour town")
    assert json.loads(fresh.loc["demo-01", "gold_answers"]) == ["Port Quillan"]
    assert "1933 memoir by the harbour keeper" in fresh.loc["demo-01", "context"]
    assert "1931 memoir" not in fresh.loc["demo-01", "context"]
    before = rows(tmp_path / "r2").set_index("question_id")
    assert (fresh.drop(index="demo-01")["question"] == before.drop(index="demo-01")["question"]).all()


class Payload:
    """Unpickling this creates the marker file: proof that a cache file ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_planted_pickles_never_run_and_damaged_caches_are_recomputed(tmp_path, source):
    cache = tmp_path / "cache"
    run(cache, tmp_path / "r1", cwd=source)
    [entry] = pool_files(cache)
    marker = tmp_path / "code-ran"
    payload = pickle.dumps(Payload(marker))
    entry.write_bytes(payload)
    (cache / "pools" / f"{entry.stem}.pkl").write_bytes(payload)
    embeddings = cache / "embeddings.sqlite"
    size = embeddings.stat().st_size
    with open(embeddings, "r+b") as handle:
        handle.truncate(size // 2)
    (cache / "responses.sqlite").write_bytes(os.urandom(8192))

    out = run(cache, tmp_path / "r2", cwd=source)
    assert not marker.exists()
    assert str(entry) in out and str(embeddings) in out
    assert list((cache / "pools").glob(f"{entry.name}.corrupt-*"))
    assert list(cache.glob("embeddings.sqlite.corrupt-*")) and list(cache.glob("responses.sqlite.corrupt-*"))
    assert counters(tmp_path / "r2")["encoder_texts_computed"] > 0  # recomputed, not read from the damaged file
    pd.testing.assert_frame_equal(rows(tmp_path / "r1"), rows(tmp_path / "r2"))


def test_a_pool_file_planted_from_another_cache_is_refused_and_recomputed(tmp_path, source):
    """Two caches filled at seeds 42 and 13; the seed-13 pool file copied over the seed-42 file's name."""
    cache42, cache13 = tmp_path / "c42", tmp_path / "c13"
    seed_42 = ("dataset.sample_size=8", "seed=42")
    run(cache42, tmp_path / "r42", *seed_42, cwd=source, own_embeddings=False)
    run(cache13, tmp_path / "r13", "dataset.sample_size=8", "seed=13", cwd=source, own_embeddings=False)
    [entry42], [entry13] = pool_files(cache42), pool_files(cache13)
    assert entry42.name != entry13.name
    shutil.copyfile(entry13, entry42)

    out = run(cache42, tmp_path / "again", *seed_42, cwd=source, own_embeddings=False)
    assert str(entry42) in out and "written for key" in out
    assert list((cache42 / "pools").glob(f"{entry42.name}.corrupt-*")), "the planted file is moved aside"
    again = rows(tmp_path / "again")
    pd.testing.assert_frame_equal(rows(tmp_path / "r42"), again)  # seed 42's questions, recomputed
    assert set(again["question_id"]) != set(rows(tmp_path / "r13")["question_id"])


@pytest.mark.parametrize("read", [False, True], ids=["select-only", "reading"])
def test_two_runs_sharing_one_cache_at_once_finish_with_identical_rows(tmp_path, source, read):
    cache = tmp_path / "cache"
    # The tests' reader: what is checked is two processes sharing one cache, not which model answers.
    extra = ["dataset.sample_size=4", "reader.batch_size=4", TINY_READER] if read else []
    procs = [
        subprocess.Popen(
            command(tmp_path / f"r{i}", *extra, read=read),
            cwd=source,
            env=environment(cache),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in (1, 2)
    ]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    for proc, output in zip(procs, outputs, strict=False):
        assert proc.returncode == 0, output[-4000:]
    first, second = rows(tmp_path / "r1"), rows(tmp_path / "r2")
    assert len(first) == (4 if read else 12)
    pd.testing.assert_frame_equal(first, second)
    if read:
        assert first["answer"].notna().all()
    assert len(pool_files(cache)) == 1 and not list(cache.rglob("*.corrupt-*"))


def cache_command(*args: str, cwd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc.stdout


def test_a_cache_copied_into_postgresql_serves_a_run_on_another_host(tmp_path, source, postgres_url):
    """Folder -> database -> folder with ``python -m harness.cache copy``; a run on the database (and an
    empty cache folder, as on another host) computes nothing the first run computed and writes the same rows."""
    from tests.helpers.postgres import new_database

    url = new_database(postgres_url)
    first, empty, back = tmp_path / "first", tmp_path / "empty", tmp_path / "back"
    run(first, tmp_path / "r1", "dataset.sample_size=6", TINY_READER, cwd=source, read=True)
    assert "copied" in cache_command("copy", str(first), url, "--quiet", cwd=source)

    proc = subprocess.run(
        command(tmp_path / "r2", "dataset.sample_size=6", TINY_READER, read=True),
        cwd=source,
        env={**environment(empty), "HARNESS_CACHE_URL": url},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "pools: reusing cache database" in proc.stdout + proc.stderr
    assert counters(tmp_path / "r2")["encoder_texts_computed"] == 0
    assert counters(tmp_path / "r2")["reader_prompts_generated"] == 0
    assert not list(empty.rglob("*.sqlite")) and not list(empty.rglob("*.npz"))  # nothing went to local files
    pd.testing.assert_frame_equal(rows(tmp_path / "r1"), rows(tmp_path / "r2"))

    cache_command("copy", url, str(back), "--quiet", cwd=source)

    def listing(folder: Path) -> list[str]:  # "info" lines after the location: store and entry count
        return cache_command("info", str(folder), cwd=source).splitlines()[1:]

    assert listing(first) and listing(first) == listing(back)
    assert [p.name for p in pool_files(back)] == [p.name for p in pool_files(first)]
