"""`python -m harness.data fetch` when something goes wrong, against a real HTTP server on loopback: each failure
says what happened and what to do, one dataset's failure does not stop the next, and nothing is left behind
but data. The last tests check that the run command a fetch prints reads the file it fetched."""

from __future__ import annotations

import shlex
import threading
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from harness.data.fetch.cli import main, run_command
from harness.data.fetch.download import locked
from harness.data.fetch.registry import load_registry
from tests.conftest import REPO, compose_cfg
from tests.helpers.file_server import FileServer
from tests.test_data_fetch import HOTPOT, HOTPOT_SAMPLE, HOTPOT_SHA, fetch, mirror, sha256, write_registry

__all__ = ["mirror"]  # the fixture, used by name

MUSIQUE = "musique/musique_ans_v1.0_dev.jsonl"


def leftovers(data: Path) -> list[Path]:
    """What a fetch must not leave in a data folder: lock files, and partial files with nothing in them."""
    return [p for p in data.rglob("*") if p.suffix == ".lock" or (p.suffix == ".part" and not p.stat().st_size)]


def test_a_refused_download_says_what_the_mismatch_means_and_what_to_do(tmp_path, mirror, capsys):
    (mirror.root / HOTPOT).write_bytes(HOTPOT_SAMPLE.read_bytes().replace(b"Scott Derrickson", b"Scott Derricksen"))
    assert fetch(tmp_path / "data", "hotpotqa", "--mirror", mirror.url) == 1
    error = " ".join(capsys.readouterr().err.split())
    assert "another version of the file" in error and "--registry FILE" in error
    assert "docs/data.md#datasets-of-your-own" in error and "not the dataset's figure" in error
    assert "## Datasets of your own" in (REPO / "docs" / "data.md").read_text()  # the anchor the link names
    assert "Without internet" not in error


def test_a_failed_dataset_does_not_skip_the_next_and_the_end_lists_both(tmp_path, mirror, capsys):
    (mirror.root / MUSIQUE).unlink()  # the mirror lacks musique: 404
    data = tmp_path / "data"
    assert fetch(data, "musique", "hotpotqa", "--mirror", mirror.url) == 1
    assert sha256(data / HOTPOT) == HOTPOT_SHA
    captured = capsys.readouterr()
    assert f"downloaded {data / HOTPOT}" in " ".join(captured.out.split())
    summary = captured.err.splitlines()[-2:]
    assert summary[0] == "fetched: hotpotqa" and summary[1].startswith("failed: musique ")
    assert not leftovers(data)


def test_an_archive_without_a_member_extracts_the_others_and_records_the_archives_own_hash(tmp_path, capsys):
    served = tmp_path / "served"
    served.mkdir()
    archive = served / "mine.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("d/a.json", b"[1]")
        handle.writestr("d/b.json", b"[2]")

    def member(name: str) -> dict:
        return {"path": f"mine/{name}", "sources": [f"{server.url}/mine.zip"], "archive": "mine/mine.zip",
                "member": f"d/{name}", "sha256": None, "size": None}  # fmt: skip

    data = tmp_path / "data"
    with FileServer(served) as server:
        registry = write_registry(tmp_path / "r.yaml", "mine", [member("a.json"), member("b.json"), member("c.json")])
        argv = ["fetch", "--registry", str(registry), "--data-dir", str(data), "--quiet", "mine"]
        assert main(argv) == 1
    assert len(server.log) == 1  # the archive once, for all three members
    assert (data / "mine" / "a.json").read_bytes() == b"[1]" and (data / "mine" / "b.json").read_bytes() == b"[2]"
    assert not (data / "mine" / "c.json").exists()
    captured = capsys.readouterr()
    out, error = " ".join(captured.out.split()), " ".join(captured.err.split())
    assert f"extracted {data / 'mine' / 'a.json'}" in out and f"extracted {data / 'mine' / 'b.json'}" in out
    assert "no member 'd/c.json'" in error and "failed: mine (2 of 3 files fetched)" in error
    archive_sha, member_sha = sha256(archive), sha256(data / "mine" / "a.json")
    # trust on first use names, and records, the archive's own hash; each member's record holds its own
    assert f"recorded its sha256 {archive_sha} in mine/mine.zip.sha256" in error and member_sha not in error
    assert (data / "mine" / "mine.zip.sha256").read_text().split()[0] == archive_sha
    assert (data / "mine" / "a.json.sha256").read_text().split()[0] == member_sha
    assert not leftovers(data)


def test_a_fetch_leaves_no_lock_files_whether_it_succeeds_or_fails(tmp_path, mirror):
    data = tmp_path / "data"
    assert fetch(data, "hotpotqa", "--mirror", mirror.url) == 0
    (mirror.root / MUSIQUE).unlink()
    assert fetch(data, "musique", "--mirror", mirror.url) == 1
    assert not leftovers(data) and not list((data / "musique").iterdir())


def test_the_lock_still_lets_one_job_at_a_time_though_its_file_is_removed(tmp_path):
    inside, most = [0], [0]
    guard = threading.Lock()

    def job() -> None:
        for _ in range(20):
            with locked(tmp_path / "file.json"):
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.001)
                with guard:
                    inside[0] -= 1

    threads = [threading.Thread(target=job) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1 and not list(tmp_path.iterdir())


@pytest.mark.parametrize("failure", ["missing", "cut", "stalled", "refused"])
def test_each_failure_says_what_happened_and_only_a_dead_network_asks_for_a_mirror(tmp_path, mirror, capsys, failure):
    size, url = HOTPOT_SAMPLE.stat().st_size, f"{mirror.url}/{HOTPOT}"
    if failure == "missing":
        (mirror.root / HOTPOT).unlink()
    elif failure == "cut":
        mirror.cut_after = 200_000
    elif failure == "stalled":
        mirror.stall_after = 1000
    else:
        url = f"http://127.0.0.1:9/{HOTPOT}"  # the discard port: refused
    registry = write_registry(tmp_path / "r.yaml", "hotpotqa", [{"path": HOTPOT, "sources": [url], "size": size}])
    data = tmp_path / "data"
    argv = ["fetch", "--registry", str(registry), "--data-dir", str(data), "--quiet", "--timeout", "0.5", "hotpotqa"]
    started = time.monotonic()
    assert main(argv) == 1
    assert time.monotonic() - started < 10
    error = " ".join(capsys.readouterr().err.split())
    if failure == "missing":
        assert f"HTTP 404 Not Found from {url}" in error
    elif failure == "cut":
        kept = (data / (HOTPOT + ".part")).stat().st_size  # kept for the next fetch to resume
        assert f"transfer cut after {kept:,} of {size:,} bytes from {url}; the next fetch resumes" in error
    elif failure == "stalled":
        assert f"no data for 0.5 s from {url}" in error
    else:
        assert f"no connection to {url}" in error
    assert ("Without internet" in error) == (failure == "refused")
    assert not leftovers(data)


# ----------------------------------------------------------------------------------------------------------
# the run command printed after a fetch reads the fetched file


def run_line(error: str) -> list[str]:
    (line,) = [line for line in error.splitlines() if "run it with: " in line]
    command = shlex.split(line.split("run it with: ", 1)[1].split(" (", 1)[0])
    assert command[:3] == ["python", "-m", "harness"], line
    return command[3:]


@pytest.mark.parametrize(
    "configs,path",
    [(["hotpotqa"], "mine/dev.json"), (None, "mine/dev.json"), (["hotpotqa"], HOTPOT)],
    ids=["another-path", "no-configs", "the-default-path"],
)
def test_the_run_command_after_a_fetch_reads_the_fetched_file(tmp_path, mirror, capsys, configs, path):
    (mirror.root / path).parent.mkdir(parents=True, exist_ok=True)
    (mirror.root / path).write_bytes(HOTPOT_SAMPLE.read_bytes())
    entry = {"license": "mine", "citation": "mine", "files": [{"path": path, "sources": [f"{mirror.url}/{path}"]}]}
    registry = tmp_path / "r.yaml"
    registry.write_text(yaml.safe_dump({"datasets": {"mine": {**entry, **({"configs": configs} if configs else {})}}}))
    data = tmp_path / "data"
    assert main(["fetch", "--registry", str(registry), "--data-dir", str(data), "--quiet", "mine"]) == 0
    overrides = run_line(capsys.readouterr().err)
    if configs is None:
        assert overrides[0] == "dataset=CONFIG"
        overrides[0] = "dataset=hotpotqa"  # the user's pick: the config of the file's layout
    cfg = compose_cfg(overrides)
    assert Path(str(cfg.dataset.path)) == data / path


@pytest.mark.parametrize("name", sorted(load_registry()))
def test_the_run_command_of_every_packaged_dataset_reads_what_its_fetch_puts_there(name, tmp_path):
    dataset = load_registry()[name]
    overrides = shlex.split(run_command(dataset, tmp_path))[3:]
    cfg = compose_cfg(overrides)
    read = Path(str(cfg.dataset.get("path") or cfg.dataset.get("root")))
    fetched = [tmp_path / file.path for file in dataset.files]
    assert any(read == path or read in path.parents for path in fetched), (overrides, read)
