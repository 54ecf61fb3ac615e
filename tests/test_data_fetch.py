"""`python -m harness.data fetch`: verified, resumable downloads from a real HTTP server on loopback.

The server honours Range requests and serves the benchmark samples beside the repository under the paths a
fetch gives the official files; ``tests/data/samples_registry.yaml`` gives their hashes.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from harness.data.fetch.cli import main
from harness.data.fetch.extract import UnsafeArchive, extract_member
from harness.data.fetch.registry import load_registry, read_registry
from tests.conftest import CONF, REPO, compose_cfg
from tests.helpers.file_server import FileServer
from tests.helpers.shared_data import SAMPLES, SHARED_DATA

REGISTRY = REPO / "tests" / "data" / "samples_registry.yaml"
HOTPOT = "hotpotqa/hotpot_dev_distractor_v1.json"
HOTPOT_SAMPLE = SHARED_DATA / SAMPLES[HOTPOT]
HOTPOT_SHA = "f764184c713165e24c511fa067f76217d2eb9ad5c87223f268a6feedf45e812b"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def mirror(tmp_path) -> FileServer:
    """A mirror: a folder laid out as a data folder, holding the samples under the fetched names."""
    root = tmp_path / "mirror"
    for fetched in (HOTPOT, "musique/musique_ans_v1.0_dev.jsonl"):
        (root / fetched).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHARED_DATA / SAMPLES[fetched], root / fetched)
    with FileServer(root) as server:
        yield server


def fetch(data_dir: Path, *arguments: str) -> int:
    return main(["fetch", "--registry", str(REGISTRY), "--data-dir", str(data_dir), "--quiet", *arguments])


def write_registry(path: Path, name: str, files: list[dict]) -> Path:
    entry = {"configs": [name], "license": "test", "citation": "test", "files": files}
    path.write_text(yaml.safe_dump({"datasets": {name: entry}}), encoding="utf-8")
    return path


def test_fetch_from_a_mirror_places_the_verified_file(tmp_path, mirror, capsys):
    data = tmp_path / "data"
    assert fetch(data, "hotpotqa", "--mirror", mirror.url) == 0
    assert sha256(data / HOTPOT) == HOTPOT_SHA
    assert [(s.path, s.status) for s in mirror.log] == [(HOTPOT, 200)]
    assert not list(data.rglob("*.part"))
    assert f"downloaded {data / HOTPOT}" in " ".join(capsys.readouterr().out.split())


def test_the_mirror_comes_from_the_environment_too(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv("HARNESS_DATA_MIRROR", mirror.url)
    assert fetch(tmp_path / "data", "musique") == 0
    assert [s.path for s in mirror.log] == ["musique/musique_ans_v1.0_dev.jsonl"]


def test_a_second_fetch_transfers_nothing(tmp_path, mirror, capsys):
    data = tmp_path / "data"
    assert fetch(data, "hotpotqa", "--mirror", mirror.url) == 0
    assert fetch(data, "hotpotqa", "--mirror", mirror.url) == 0
    assert len(mirror.log) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("present")


def test_an_interrupted_transfer_resumes_where_it_stopped(tmp_path, mirror, capsys):
    data, cut = tmp_path / "data", 200_000
    mirror.cut_after = cut  # the connection drops after 200,000 bytes of the body
    assert fetch(data, "hotpotqa", "--mirror", mirror.url) == 1
    assert not (data / HOTPOT).exists()
    kept = (data / (HOTPOT + ".part")).stat().st_size  # what reached the disk (whole 1 KiB chunks)
    assert cut - 1024 < kept <= cut
    assert fetch(data, "hotpotqa", "--mirror", mirror.url) == 0
    resumed = mirror.log[-1]
    assert (resumed.range, resumed.status, resumed.sent) == (f"bytes={kept}-", 206, HOTPOT_SAMPLE.stat().st_size - kept)
    assert sha256(data / HOTPOT) == HOTPOT_SHA
    assert f"resuming hotpot_dev_distractor_v1.json at byte {kept:,}" in capsys.readouterr().err


def test_a_server_that_ignores_range_gets_the_file_again_from_its_first_byte(tmp_path, mirror):
    data = tmp_path / "data"
    mirror.cut_after = 100_000
    assert fetch(data, "hotpotqa", "--mirror", mirror.url) == 1
    mirror.ignore_range = True  # the resumed request is answered with the whole file: not appended to the part
    assert fetch(data, "hotpotqa", "--mirror", mirror.url) == 0
    assert [(s.range is not None, s.status) for s in mirror.log[1:]] == [(True, 200), (False, 200)]
    assert sha256(data / HOTPOT) == HOTPOT_SHA


def test_a_file_whose_bytes_do_not_match_is_refused_and_leaves_nothing(tmp_path, mirror, capsys):
    (mirror.root / HOTPOT).write_bytes(HOTPOT_SAMPLE.read_bytes().replace(b"Scott Derrickson", b"Scott Derricksen"))
    data = tmp_path / "data"
    assert fetch(data, "hotpotqa", "--mirror", mirror.url) == 1
    error = capsys.readouterr().err
    got = sha256(mirror.root / HOTPOT)
    assert str(data / HOTPOT) in error and f"expected {HOTPOT_SHA}" in error and f"got {got}" in error
    assert not (data / HOTPOT).exists() and not list(data.rglob("*.part"))


def test_sources_are_tried_in_order_and_offline_the_error_names_the_url_and_the_mirror(tmp_path, mirror, capsys):
    dead = "http://127.0.0.1:9/datasets/hotpot/hotpot_dev_distractor_v1.json"  # the discard port: refused
    file = {"path": HOTPOT, "sources": [dead], "sha256": HOTPOT_SHA, "size": 665489}
    registry = write_registry(tmp_path / "offline.yaml", "hotpotqa", [file])
    data = tmp_path / "data"
    argv = ["fetch", "--registry", str(registry), "--data-dir", str(data), "--quiet", "hotpotqa"]
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert dead in error and "--mirror URL" in error and "HARNESS_DATA_MIRROR" in error
    assert not (data / HOTPOT).exists()
    write_registry(registry, "hotpotqa", [{**file, "sources": [dead, f"{mirror.url}/{HOTPOT}"]}])
    assert main(argv) == 0 and sha256(data / HOTPOT) == HOTPOT_SHA


def test_without_a_published_checksum_the_first_fetch_records_it_and_says_so(tmp_path, mirror, capsys):
    file = {"path": HOTPOT, "sources": [f"{mirror.url}/{HOTPOT}"], "sha256": None, "size": None}
    registry = write_registry(tmp_path / "tofu.yaml", "hotpotqa", [file])
    data = tmp_path / "data"
    argv = ["fetch", "--registry", str(registry), "--data-dir", str(data), "--quiet", "hotpotqa"]
    assert main(argv) == 0
    assert "no published checksum" in capsys.readouterr().err
    assert (data / (HOTPOT + ".sha256")).read_text().split()[0] == HOTPOT_SHA
    (data / HOTPOT).write_bytes(b"[]")  # changed after the first fetch: the record catches it
    assert main(argv) == 1
    assert f"expected {HOTPOT_SHA}" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------------
# archives


def tar_with(path: Path, members: dict[str, bytes], link: tuple[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type, info.linkname = tarfile.SYMTYPE, link[1]
            archive.addfile(info)
    return path


def zip_with(path: Path, members: dict[str, bytes], link: tuple[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link[0])
            info.external_attr = 0o120777 << 16  # a symbolic link, its target as the content
            archive.writestr(info, link[1])
    return path


def test_a_member_is_fetched_from_a_verified_archive(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    archive = tar_with(served / "qasper.tgz", {"qasper-dev-v0.3.json": b'{"x": 1}', "other.json": b"{}"})
    with FileServer(served) as server:
        file = {
            "path": "qasper/qasper-dev-v0.3.json", "sources": [f"{server.url}/qasper.tgz"],
            "archive": "qasper/qasper.tgz", "member": "qasper-dev-v0.3.json",
            "sha256": sha256(archive), "size": archive.stat().st_size,
        }  # fmt: skip
        registry = write_registry(tmp_path / "r.yaml", "qasper", [file])
        argv = ["fetch", "--registry", str(registry), "--data-dir", str(tmp_path / "data"), "--quiet", "qasper"]
        assert main(argv) == 0
        assert (tmp_path / "data" / "qasper" / "qasper-dev-v0.3.json").read_bytes() == b'{"x": 1}'
        assert main(argv) == 0
        assert len(server.log) == 1  # present and verified by its recorded hash: nothing downloaded again


@pytest.mark.parametrize("kind", ["tar", "zip"])
@pytest.mark.parametrize(
    "members,link",
    [
        ({"../escape.json": b"x", "data.json": b"{}"}, None),
        ({"/etc/escape.json": b"x", "data.json": b"{}"}, None),
        ({"data.json": b"{}"}, ("outward", "../../outside")),
        ({"data.json": b"{}"}, ("absolute", "/etc/passwd")),
    ],
    ids=["dot-dot", "absolute", "link-out", "link-absolute"],
)
def test_an_archive_with_a_member_or_link_outside_the_folder_is_refused(tmp_path, kind, members, link):
    make = tar_with if kind == "tar" else zip_with
    archive = make(tmp_path / f"bad.{kind}", members, link)
    destination = tmp_path / "out" / "data.json"
    with pytest.raises(UnsafeArchive) as refused:
        extract_member(archive, "data.json", destination)
    assert str(archive) in str(refused.value)
    assert not destination.exists() and not (tmp_path / "escape.json").exists()


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_a_safe_archive_with_an_inner_link_is_extracted(tmp_path, kind):
    make = tar_with if kind == "tar" else zip_with
    archive = make(tmp_path / f"ok.{kind}", {"d/data.json": b"[1]"}, ("d/alias", "data.json"))
    extract_member(archive, "d/data.json", tmp_path / "out" / "data.json")
    assert (tmp_path / "out" / "data.json").read_bytes() == b"[1]"


# ----------------------------------------------------------------------------------------------------------
# registry, list, configs


def test_a_registry_error_names_the_file_the_dataset_and_the_field(tmp_path, capsys):
    registry = write_registry(tmp_path / "bad.yaml", "mine", [{"path": "mine/x.json", "sources": ["ftp://x"]}])
    assert main(["list", "--registry", str(registry)]) == 2
    error = capsys.readouterr().err
    assert str(registry) in error and "'mine'" in error and "files[0].sources" in error


def test_list_names_each_dataset_its_license_citation_and_whether_it_is_here(tmp_path, mirror, capsys):
    data = tmp_path / "data"
    assert fetch(data, "hotpotqa", "--mirror", mirror.url) == 0
    capsys.readouterr()
    assert main(["list", "--registry", str(REGISTRY), "--data-dir", str(data)]) == 0
    table = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in table.splitlines() if line.count("│") > 5}
    assert "│ yes " in rows["hotpotqa"] and "│ no " in rows["musique"] and "CC BY-SA 4.0" in rows["hotpotqa"]
    assert "qasper" in rows and "Dasigi et al., 2021" in table


def test_the_packaged_registry_is_valid_and_names_every_dataset_config():
    datasets = load_registry()
    configured = {c for d in datasets.values() for c in d.configs}
    configs = {p.stem for p in (CONF / "dataset").glob("*.yaml")}
    assert configured <= configs, configured - configs
    # the demo ships inside the package; DPR's retrieval results are a 1 GB gzip the user converts themselves
    assert configs - configured == {"demo", "nq_open_dpr"}
    assert read_registry(REGISTRY)["hotpotqa"].files[0].sha256 == HOTPOT_SHA


@pytest.mark.parametrize("config", sorted(p.stem for p in (CONF / "dataset").glob("*.yaml")))
def test_every_dataset_config_reads_from_the_data_folder_where_its_fetch_puts_it(config, tmp_path):
    from harness.data.fetch.registry import dataset_for_path

    text = (CONF / "dataset" / f"{config}.yaml").read_text()
    assert "../shared" not in text
    if config == "demo":
        return
    cfg = compose_cfg([f"dataset={config}", f"paths.data_dir={tmp_path}"])
    path = Path(str(cfg.dataset.get("path") or cfg.dataset.get("root")))
    assert tmp_path in path.parents, path
    dataset = dataset_for_path(path, tmp_path)
    assert (dataset is not None and config in dataset.configs) or config == "nq_open_dpr"


def test_a_missing_dataset_file_names_its_fetch_command(tmp_path):
    from harness.run.config_check import problems

    cfg = compose_cfg(["dataset=qasper", f"paths.data_dir={tmp_path}"])
    (line,) = [p for p in problems(cfg) if p.startswith("dataset.path")]
    assert "python -m harness.data fetch qasper" in line and str(tmp_path / "qasper" / "qasper-dev-v0.3.json") in line


@pytest.mark.slow
def test_from_a_clone_fetch_then_run(tmp_path, mirror):
    """A user's world: a clone with no folder of samples beside it and no HARNESS_DATA_DIR, a mirror and a
    registry; the fetch puts the file in the clone's data/, then a run on what it fetched. (The models come
    from this checkout's folder: a clone's `make setup` would convert them again.)"""
    clone = tmp_path / "clone"
    if (REPO / ".git").exists():
        clone_command = ["git", "clone", "--quiet", "--depth", "1", f"file://{REPO}", str(clone)]
        subprocess.run(clone_command, check=True, timeout=120)
    else:  # a tree exported without its history: a copy of what a clone holds
        local = {".cache", "outputs", "build", "data"}  # what a clone lacks, at the top level only

        def skipped(folder: str, names: list[str]) -> set[str]:
            top = Path(folder) == REPO
            return {n for n in names if top and (n in local or n.startswith(".venv"))}

        shutil.copytree(REPO, clone, ignore=skipped)
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_DATA_DIR", "HARNESS_DATA_MIRROR")}
    env |= {"HARNESS_MODELS_DIR": str(REPO / ".cache" / "models"), "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    assert not (clone.parent / "shared").exists()
    fetched = subprocess.run(
        [sys.executable, "-m", "harness.data", "fetch", "hotpotqa", "--mirror", mirror.url, "--registry", REGISTRY],
        cwd=clone, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    assert "run it with: python -m harness dataset=hotpotqa" in fetched.stderr
    assert sha256(clone / "data" / HOTPOT) == HOTPOT_SHA  # the clone's own data folder
    run = subprocess.run(
        [sys.executable, "-m", "harness", "dataset=hotpotqa", "dataset.sample_size=12", "read=false", "logger=none",
         f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"from {clone}" in run.stdout.splitlines()[0]  # the clone's code ran, not this checkout's
    assert "12 questions from hotpotqa" in run.stdout + run.stderr
    assert (tmp_path / "run" / "rows.parquet").is_file()


def test_every_data_command_of_the_data_page_runs(tmp_path, mirror, monkeypatch, capsys):
    """docs/data.md's `python -m harness.data` lines, against the loopback mirror and the samples' registry."""
    from tests.helpers.doc_commands import command_lines

    commands = [c for c in command_lines(REPO / "docs" / "data.md") if c.module == "harness.data"]
    assert {c.arguments[0] for c in commands} == {"list", "fetch", "urls"}
    monkeypatch.setenv("HARNESS_DATA_MIRROR", mirror.url)  # what the page's mirror URL stands for here
    for command in commands:
        assert dict(command.env).keys() <= {"HARNESS_DATA_MIRROR"}, command
        arguments = [*command.arguments, "--registry", str(REGISTRY), "--data-dir", str(tmp_path / "data")]
        assert main(arguments) == 0, (str(command), capsys.readouterr().err)
    assert sha256(tmp_path / "data" / HOTPOT) == HOTPOT_SHA
    assert (tmp_path / "data" / "musique" / "musique_ans_v1.0_dev.jsonl").is_file()
