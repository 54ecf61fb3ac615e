"""What a run records of the data it read and the machine it ran on: summary.json's ``data`` and ``machine``,
the W&B run config, the report's runs table and the replication page's provenance lines; and the memo that
keeps a file's sha256 so that a rerun reads no dataset file for it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from harness.cache import file_hashes, fingerprint
from harness.cache.file_hashes import file_sha256, file_stamp, memo_path
from harness.core.threads import available_cpus
from harness.data.demo import DEMO_FILE
from harness.report.load import RunInfo
from harness.report.run_sources import source_lines
from harness.report.tables import inputs_table
from harness.run.run_record import data_record, machine_record, sample_note
from tests.conftest import REPO
from tests.helpers.report_rows import packing_rows, write_sweep

DEMO = REPO / "harness" / "data" / DEMO_FILE
IDS = ["demo-01", "demo-03", "demo-05", "demo-07", "demo-11"]


def settled(path: Path, age_s: int = 60) -> Path:
    """``path`` with its modification time ``age_s`` in the past: no longer 'just modified', so remembered."""
    when = path.stat().st_mtime_ns - age_s * 10**9
    os.utime(path, ns=(when, when))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def dataset_files(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "data"
    folder.mkdir()
    data = settled(Path(shutil.copy(DEMO, folder / "demo.json")))
    ids = folder / "ids.txt"
    ids.write_text("# the odd ones\n" + "".join(f"{i}\n" for i in IDS))
    return data, settled(ids)


@pytest.fixture
def fresh_memo(monkeypatch):
    """This process's remembered digests forgotten: what a new process finds."""
    monkeypatch.setattr(file_hashes, "_known", {})
    monkeypatch.setattr(file_hashes, "_saved", set())


@pytest.mark.slow
@pytest.mark.process
def test_a_run_records_each_file_it_read_its_ids_and_the_machine(tmp_path):
    from tests.test_pipeline import run_cli
    from tests.test_wandb_runs import RunFiles

    data, ids = dataset_files(tmp_path)
    out, cache = tmp_path / "run", tmp_path / "cache"
    args = [f"dataset.path={data}", f"+dataset.question_ids_file={ids}", "dataset.sample_size=500", "read=false"]
    env = {"WANDB_SILENT": "true", "WANDB_DATA_DIR": str(tmp_path / "wandb-data")}
    result = run_cli([*args, "logger=wandb", f"hydra.run.dir={out}"], cache_dir=cache, env_extra=env)
    assert result.returncode == 0, result.stderr[-3000:]

    # The sample asks for more questions than the id list chose: the run says so, and records the true count.
    note = "dataset.sample_size=500 but the questions ids.txt lists of demo.json holds 5 questions: all 5 read"
    assert note in result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_questions"] == 5 and len(pd.read_parquet(out / "rows.parquet")) == 5
    record = summary["data"]
    assert record["records"] == 5 and record["note"] == note
    assert record["sample_size"] == 500 and record["seed"] == 42
    files = {entry["key"]: entry for entry in record["files"]}
    assert set(files) == {"path", "question_ids_file"}
    for key, path in (("path", data), ("question_ids_file", ids)):
        assert files[key]["path"] == str(path) and files[key]["bytes"] == path.stat().st_size
        assert files[key]["sha256"] == sha256(path)
        assert (
            files[key]["sha256"]
            == subprocess.run(["sha256sum", str(path)], capture_output=True, text=True).stdout.split()[0]
        )
    assert record["question_ids_sha256"] == sha256(ids)
    assert record["questions_sha256"] == hashlib.sha256("".join(f"{i}\n" for i in IDS).encode()).hexdigest()

    machine = summary["machine"]
    assert machine["cpu"].strip() and machine["cpu_kind"] in ("amx", "avx512_bf16", "avx512", "avx2", "other")
    assert machine["cores"] == available_cpus() and machine["cores_machine"] == os.cpu_count()
    assert machine["memory_gib"] > 0 and isinstance(machine["gpus"], list)

    # The W&B run config carries the same blocks.
    [folder] = sorted((out / "wandb").glob("offline-run-*"))
    config = {item.key: json.loads(item.value_json) for item in RunFiles(folder).run.config.update}
    assert config["data"] == record and config["machine"] == machine

    # The digests are remembered under the files' stamps in the cache folder: the next run reads neither file,
    # and its run key, from the remembered digest of both, finds this run finished.
    remembered = json.loads(memo_path(cache).read_text())["digests"]
    assert remembered[file_stamp(data)] == sha256(data) and remembered[file_stamp(ids)] == sha256(ids)
    again = run_cli([*args, "logger=none", f"hydra.run.dir={out}"], cache_dir=cache)
    assert again.returncode == 0 and "already finished" in again.stdout + again.stderr, again.stderr[-3000:]


def test_the_packaged_demo_file_is_recorded_for_a_dataset_without_a_path(tmp_path, fresh_memo):
    record = data_record({"_target_": "harness.data.load_dataset", "name": "demo", "path": None, "layout": "demo",
                          "sample_size": None, "seed": 7}, [], str(tmp_path))  # fmt: skip
    [entry] = record["files"]
    assert Path(entry["path"]).read_bytes() == DEMO.read_bytes() and entry["sha256"] == sha256(DEMO)
    assert record["question_ids_sha256"] is None and record["seed"] == 7 and record["note"] is None


def test_sample_note_names_the_file_or_the_id_list():
    assert sample_note({"path": "/d/hotpot.json", "sample_size": 300}, 103) == (
        "dataset.sample_size=300 but hotpot.json holds 103 questions: all 103 read"
    )
    assert "the questions ids.txt lists of hotpot.json holds 5" in sample_note(
        {"path": "/d/hotpot.json", "question_ids_file": "/q/ids.txt", "sample_size": 300}, 5
    )
    assert sample_note({"path": "/d/hotpot.json", "sample_size": 100}, 103) is None
    assert sample_note({"path": "/d/hotpot.json", "sample_size": None}, 103) is None


def test_machine_record_counts_the_cpus_this_process_may_use():
    machine = machine_record()
    assert machine["cores"] == available_cpus() and machine["cpu"]
    assert machine["gpus"] == [] or all(gpu["name"] and gpu["memory_gib"] > 0 for gpu in machine["gpus"])


def test_a_remembered_digest_is_used_until_the_files_size_or_mtime_changes(tmp_path, fresh_memo):
    data = settled(Path(shutil.copy(DEMO, tmp_path / "demo.json")))
    cache = tmp_path / "cache"
    cache.mkdir()
    planted = "0" * 64  # no file has this digest: finding it proves the file was not read
    memo_path(cache).write_text(json.dumps({"version": 1, "digests": {file_stamp(data): planted}}))
    assert file_sha256(data, cache) == planted

    when = data.stat().st_mtime_ns - 10**9
    os.utime(data, ns=(when, when))  # another mtime, same bytes: digested afresh
    assert file_sha256(data, cache) == sha256(data)
    with open(data, "ab") as handle:
        handle.write(b"\n")
    settled(data)  # another size
    assert file_sha256(data, cache) == sha256(data) != sha256(DEMO)
    digests = json.loads(memo_path(cache).read_text())["digests"]
    assert digests[file_stamp(data)] == sha256(data) and list(digests.values()).count(planted) == 1


def test_a_second_process_reads_no_file_for_a_remembered_digest(tmp_path, monkeypatch, fresh_memo):
    data = settled(Path(shutil.copy(DEMO, tmp_path / "demo.json")))
    cache = tmp_path / "cache"
    reads: list[Path] = []
    read_into = file_hashes.read_into
    monkeypatch.setattr(file_hashes, "read_into", lambda path, digest: (reads.append(path), read_into(path, digest)))
    dataset = {"path": str(data), "layout": "demo"}
    key = fingerprint.input_files_digest(dataset, cache)  # the run key's digest: one read gives both
    assert file_sha256(data, cache) == sha256(data) and reads == [data]

    monkeypatch.setattr(file_hashes, "_known", {})  # a new process: only the memo file is left
    assert fingerprint.input_files_digest(dataset, cache) == key and file_sha256(data, cache) == sha256(data)
    assert reads == [data]


def test_a_file_modified_just_now_is_digested_every_time_and_never_remembered(tmp_path, fresh_memo):
    data = tmp_path / "demo.json"
    data.write_bytes(DEMO.read_bytes())
    assert file_stamp(data) is None
    assert file_sha256(data, tmp_path / "cache") == sha256(data)
    assert not memo_path(tmp_path / "cache").exists()


def test_a_damaged_memo_is_ignored_and_rewritten(tmp_path, fresh_memo):
    data = settled(Path(shutil.copy(DEMO, tmp_path / "demo.json")))
    memo_path(tmp_path).write_text("{not json")
    assert file_sha256(data, tmp_path) == sha256(data)
    assert json.loads(memo_path(tmp_path).read_text())["digests"] == {file_stamp(data): sha256(data)}


SUMMARY = {
    "data": {
        "name": "demo",
        "files": [{"key": "path", "path": "/d/demo.json", "sha256": "4a026cb0dec2" + "0" * 52, "bytes": 17907}],
        "records": 12,
        "question_ids_sha256": None,
        "sample_size": None,
        "seed": 42,
    },
    "machine": {"cpu": "AMD EPYC", "cpu_kind": "avx2", "cores": 2, "memory_gib": 23.5,
                "gpus": [{"name": "NVIDIA H100", "memory_gib": 79.1, "capability": "9.0"}] * 2},
}  # fmt: skip


def test_the_report_names_the_data_and_machine_of_each_run(tmp_path):
    assert source_lines([SUMMARY, SUMMARY, {"n_questions": 3}]) == [
        "Data read: `demo.json` sha256 `4a026cb0dec2` (17,907 bytes); 12 questions read, seed 42.",
        "Ran on: AMD EPYC (avx2), 2 cores, 23.5 GiB, 2 GPUs: 2 x NVIDIA H100 (79.1 GiB).",
    ]
    rows = packing_rows(3, "packed", 96, 42, "tiny-135m").assign(run_dir=str(tmp_path), policy="packed", qkey="q")
    table = inputs_table([RunInfo(tmp_path, 3, SUMMARY), RunInfo(tmp_path / "old", 0, {})], rows)
    assert table.data["data"].tolist() == [f"demo.json {SUMMARY['data']['files'][0]['sha256']}", "–"]
    assert table.display["data"].tolist() == ["demo.json 4a026cb0dec2", "–"]
    assert table.display["machine"].iloc[0].startswith("AMD EPYC (avx2), 2 cores")


def test_the_replication_page_says_what_each_sections_runs_read(tmp_path):
    from harness.report.replication import PACKING, Settings, render

    studies = tmp_path / "studies"
    frames = [packing_rows(20, packer, 160, 42, "tiny-135m") for packer in ("packed", "submod")]
    write_sweep(studies / PACKING.directory, frames)
    for job in (studies / PACKING.directory).iterdir():
        (job / "summary.json").write_text(json.dumps(SUMMARY))
    text = render(Settings(studies, tmp_path / "r.md", 200))
    packing = text.split("## Seed 000: budgeted packing")[1]
    assert "Data read: `demo.json` sha256 `4a026cb0dec2` (17,907 bytes); 12 questions read, seed 42." in packing
    assert "Ran on: AMD EPYC (avx2), 2 cores, 23.5 GiB, 2 GPUs: 2 x NVIDIA H100 (79.1 GiB)." in packing
