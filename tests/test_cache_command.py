"""``python -m harness.cache``: what it is given and what it copies is checked. An unsupported URL, a
database where a folder is needed, a file or a folder that is not a cache, and a damaged SQLite file are each
a one-line error naming the location and a non-zero exit; ``copy`` checks every entry as a run would and
leaves the ones a run would refuse behind, naming them."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.cache import TextStore, stores
from harness.cache.__main__ import main
from harness.cache.pools import PoolCache
from tests.test_cache_identity import demo_pools


@pytest.fixture(autouse=True)
def local_stores(tmp_path, monkeypatch):
    stores.configure(None)
    monkeypatch.chdir(tmp_path)  # a location mistaken for a folder would appear here


def error_of(capsys, *argv: str) -> str:
    """The one line ``main(argv)`` writes to stderr, asserting it fails."""
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code != 0, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def a_cache(folder: Path) -> Path:
    store = TextStore(folder / "responses.sqlite", table="responses")
    store.put_texts({"a": {"answer": "Paris"}})
    store.close()  # its log and index go now, not whenever the store is collected
    return folder


@pytest.mark.parametrize("url", ["mysql://user@db/harness", "postgresql+psycopg://user@db/harness"])
def test_copy_into_an_unsupported_url_is_an_error_and_makes_no_folder(tmp_path, capsys, url):
    source = a_cache(tmp_path / "cache")
    before = sorted(tmp_path.rglob("*"))
    line = error_of(capsys, "copy", str(source), url)
    assert url in line and "postgresql://" in line
    assert sorted(tmp_path.rglob("*")) == before
    assert url.split(":")[0] in error_of(capsys, "info", url)
    assert url in error_of(capsys, "copy", url, str(tmp_path / "out"))


def test_reseal_of_a_database_url_is_an_error(tmp_path, capsys):
    before = sorted(tmp_path.rglob("*"))
    line = error_of(capsys, "reseal", "postgresql://user@db/harness")
    assert "postgresql://user@db/harness" in line and "folder" in line and "resealed" not in line
    assert sorted(tmp_path.rglob("*")) == before


def test_info_on_a_file_says_it_is_not_a_folder(tmp_path, capsys):
    file = tmp_path / "notes.txt"
    file.write_text("not a cache")
    line = error_of(capsys, "info", str(file))
    assert str(file) in line and "not a folder" in line and "does not exist" not in line
    assert "does not exist" in error_of(capsys, "info", str(tmp_path / "missing"))


def test_a_folder_that_is_not_a_cache_is_refused(tmp_path, capsys):
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "report.md").write_text("# not a cache")
    for argv in (["info", str(folder)], ["copy", str(folder), str(tmp_path / "out")], ["reseal", str(folder)]):
        line = error_of(capsys, *argv)
        assert str(folder) in line and "no cache" in line
    assert not (tmp_path / "out").exists()
    # Nor is one copied into: its files would be mixed with the stores.
    line = error_of(capsys, "copy", str(a_cache(tmp_path / "cache")), str(folder))
    assert str(folder) in line and "no cache" in line
    assert sorted(p.name for p in folder.iterdir()) == ["report.md"]


def test_a_damaged_sqlite_file_is_named(tmp_path, capsys):
    source = a_cache(tmp_path / "cache")
    damaged = source / "rerank.sqlite"
    damaged.write_bytes(b"this is not a database" * 100)
    for argv in (["info", str(source)], ["copy", str(source), str(tmp_path / "out")]):
        line = error_of(capsys, *argv)
        assert str(damaged) in line and "Traceback" not in line
    assert damaged.read_bytes().startswith(b"this is not")  # a source is read, never moved aside


def test_copy_leaves_behind_every_entry_a_run_would_refuse_and_names_it(tmp_path, capsys):
    _, pools, retrieval = demo_pools()
    source = a_cache(tmp_path / "cache")
    entries = PoolCache(source)
    good = Path(entries.save("good", pools, retrieval))
    truncated = Path(entries.save("truncated", pools, retrieval))
    truncated.write_bytes(truncated.read_bytes()[:1000])
    renamed = entries.path("renamed")
    shutil.copyfile(good, renamed)  # the right bytes under another key's name
    buffer = io.BytesIO()
    np.savez(buffer, counts=np.arange(3))
    entries.path("foreign").write_bytes(buffer.getvalue())  # an npz, but not a pool entry
    texts = TextStore(source / "responses.sqlite", table="responses")
    value = bytearray(texts.get_many(["a"])["a"])
    value[2] ^= 0xFF
    texts.put_many({"flipped": bytes(value)})
    out = tmp_path / "out"
    code = main(["copy", "--quiet", str(source), str(out)])
    captured = capsys.readouterr()
    assert code != 0
    assert "pools:pools\t1 entries (3 damaged, left behind)" in captured.out
    assert "responses.sqlite:responses\t1 entries (1 damaged, left behind)" in captured.out
    assert sorted(p.name for p in (out / "pools").iterdir()) == ["good.npz"]
    for path in (truncated, renamed, entries.path("foreign")):
        assert str(path) in captured.err
    assert "written for key 'good'" in captured.err and "key flipped" in captured.err
    assert PoolCache(out).load("good") is not None
    assert TextStore(out / "responses.sqlite", table="responses").get_texts(["a", "flipped"]) == {
        "a": {"answer": "Paris"}
    }
    # Nothing was moved or changed in the source.
    assert renamed.exists() and truncated.exists() and len(texts) == 2


def test_copy_of_a_sound_cache_succeeds(tmp_path, capsys):
    _, pools, retrieval = demo_pools()
    source = a_cache(tmp_path / "cache")
    PoolCache(source).save("k", pools, retrieval)
    assert main(["copy", "--quiet", str(source), str(tmp_path / "out")]) == 0
    assert "copied 2 entries in 2 stores" in capsys.readouterr().out
    assert main(["copy", "--quiet", str(source), str(tmp_path / "out")]) == 0  # into a cache: kept, not refused
    assert main(["reseal", str(source)]) == 0 and "resealed 0 entries" in capsys.readouterr().out


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def test_a_copy_never_writes_into_its_source(tmp_path, capsys):
    source = a_cache(tmp_path / "cache")
    texts = TextStore(source / "responses.sqlite", table="responses")
    value = bytearray(texts.get_many(["a"])["a"])
    value[2] ^= 0xFF
    texts.put_many({"flipped": bytes(value)})  # a damaged entry: left behind, the source untouched
    texts.close()
    before = _listing(source)
    assert main(["copy", "--quiet", str(source), str(tmp_path / "out")]) != 0
    assert "1 entries (1 damaged, left behind)" in capsys.readouterr().out
    assert _listing(source) == before  # no -wal or -shm file appeared, nothing was rewritten
    assert main(["info", str(source)]) == 0
    assert _listing(source) == before


def test_a_copy_onto_its_own_source_is_refused(tmp_path, capsys):
    source = a_cache(tmp_path / "cache")
    (tmp_path / "link").symlink_to(source)
    for destination in (source, tmp_path / "link", tmp_path / "cache" / "."):
        line = error_of(capsys, "copy", str(source), str(destination))
        assert line.endswith("is the source; name another"), line
