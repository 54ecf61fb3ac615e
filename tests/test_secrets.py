"""The cache database's password never reaches a file or a console: every libpq form is masked
(harness.cache.postgres.redacted), in messages, rows, config.yaml, Hydra's own files and its error line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from harness.cache.postgres import redacted, redacted_config

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / ".cache" / "models"
SECRET = "KNOWNPASS"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql://u:KNOWNPASS@127.0.0.1:1/db", "postgresql://u:***@127.0.0.1:1/db"),
        ("postgres://u:KNOWNPASS@h/db?sslmode=require", "postgres://u:***@h/db?sslmode=require"),
        ("postgresql://u@h/db?password=KNOWNPASS", "postgresql://u@h/db?password=***"),
        (
            "postgresql://u@h/db?sslmode=require&password=KNOWNPASS&x=1",
            "postgresql://u@h/db?sslmode=require&password=***&x=1",
        ),
        ("host=h password=KNOWNPASS dbname=db", "host=h password=*** dbname=db"),
        ("host=h password = 'KNOWN PASS' dbname=db", "host=h password = *** dbname=db"),
        ("password='KNOWN\\' PASS'", "password=***"),
        (
            "cache database postgresql://u:KNOWNPASS@h/db?password=KNOWNPASS (store x): refused",
            "cache database postgresql://u:***@h/db?password=*** (store x): refused",
        ),
        (
            "cache.url=postgresql\\://u\\:KNOWNPASS@h\\:1/db",
            "cache.url=postgresql\\://u\\:***@h\\:1/db",
        ),  # Hydra's sweep lines
        ("postgresql\\://u@h/db?password\\=KNOWNPASS", "postgresql\\://u@h/db?password\\=***"),
        ("postgresql://u@h:5432/db", "postgresql://u@h:5432/db"),
        ("postgresql://h:5432/db", "postgresql://h:5432/db"),
    ],
)
def test_every_form_libpq_accepts_is_masked(text, expected):
    assert redacted(text) == expected
    assert redacted(expected) == expected


def test_passfile_is_a_path_and_stays():
    for text in ("postgresql://u@h/db?passfile=/home/u/.pgpass", "host=h passfile=/home/u/.pgpass"):
        assert redacted(text) == text


def test_redacted_config_masks_cache_url_and_any_connection_string():
    container = {
        "seed": 1,
        "cache": {"url": "postgresql://u:KNOWNPASS@h/db", "force": False},
        "other": {"dsn": ["host=h password=KNOWNPASS"], "n": None},
    }
    masked = redacted_config(container)
    assert SECRET not in repr(masked)
    assert masked["cache"] == {"url": "postgresql://u:***@h/db", "force": False}
    assert masked["other"] == {"dsn": ["host=h password=***"], "n": None}
    assert container["cache"]["url"] == "postgresql://u:KNOWNPASS@h/db"  # a copy: the run still connects


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "HARNESS_CACHE_DIR": str(tmp_path / "cache"),
        "HARNESS_MODELS_DIR": str(MODELS),
        "WANDB_MODE": "disabled",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        **extra,
    }


def run_harness(run_dir: Path, env: dict[str, str], *overrides: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "harness", "dataset=demo", "read=false", "logger=none", f"hydra.run.dir={run_dir}"]
    return subprocess.run(
        [*command, *overrides], cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
    )


def leaks(run_dir: Path, proc: subprocess.CompletedProcess) -> list[str]:
    """Where the secret shows: 'console' and every file of the run folder holding it (bytes, so parquet too)."""
    found = ["console"] if SECRET in proc.stdout + proc.stderr else []
    found += [
        str(p.relative_to(run_dir))
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and SECRET.encode() in p.read_bytes()
    ]
    return found


@pytest.mark.process
@pytest.mark.parametrize(
    "how",
    ["userinfo override", "query parameter in HARNESS_CACHE_URL"],
)
def test_a_run_that_cannot_reach_the_database_shows_no_password(tmp_path, how):
    run_dir = tmp_path / "run"
    if how == "userinfo override":
        proc = run_harness(run_dir, environment(tmp_path), f"cache.url=postgresql://u:{SECRET}@127.0.0.1:1/db")
    else:
        url = f"postgresql://u@127.0.0.1:1/db?password={SECRET}"
        proc = run_harness(run_dir, environment(tmp_path, HARNESS_CACHE_URL=url))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    assert "cache database postgresql://u" in output and "***" in output  # the error still names the server
    assert leaks(run_dir, proc) == [], output[-3000:]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """A real PostgreSQL server (tests/helpers/postgres.py) in a folder its own system user can reach (run
    as root, pgserver starts it as another user, who cannot enter pytest's private temporary folders)."""
    from tests.helpers.postgres import postgres_server

    parent = Path(tempfile.mkdtemp(prefix="harness-secrets-"))
    parent.chmod(0o755)
    try:
        with postgres_server(parent / "data") as url:
            yield url
    finally:
        shutil.rmtree(parent, ignore_errors=True)


@pytest.mark.process
@pytest.mark.parametrize("form", ["userinfo", "query parameter"])
def test_a_run_on_a_database_given_a_password_keeps_it_out_of_every_file(tmp_path, server_url, form):
    from tests.helpers.postgres import new_database

    parts = urlsplit(new_database(server_url))
    # The test server trusts its local socket: a password in the URL is sent to nobody, yet it is in the config.
    if form == "userinfo":
        user = parts.username or "postgres"
        url = urlunsplit(parts._replace(netloc=f"{user}:{SECRET}@{parts.hostname or ''}"))
    else:
        url = urlunsplit(parts._replace(query=f"{parts.query}&password={SECRET}"))
    assert SECRET in url
    run_dir = tmp_path / "run"
    proc = run_harness(run_dir, environment(tmp_path, HARNESS_CACHE_URL=url), "dataset.sample_size=2")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert (run_dir / "config.yaml").exists() and "url: postgresql://" in (run_dir / "config.yaml").read_text()
    assert "***" in (run_dir / "config.yaml").read_text()
    assert leaks(run_dir, proc) == []


@pytest.mark.process
def test_a_sweep_shows_no_password_in_its_lines_or_files(tmp_path):
    """Hydra's launcher lines ("#0 : cache.url=postgresql\\://u\\:...") and multirun.yaml, the job's
    .hydra files, cli.log and error.txt."""
    sweep_dir = tmp_path / "sweep"
    command = [sys.executable, "-m", "harness", "-m", "dataset=demo", "read=false", "logger=none"]
    overrides = [f"cache.url=postgresql://u:{SECRET}@127.0.0.1:1/db", f"hydra.sweep.dir={sweep_dir}"]
    proc = subprocess.run(
        [*command, *overrides],
        cwd=REPO,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    assert (sweep_dir / "0" / "error.txt").exists() and (sweep_dir / "multirun.yaml").exists()
    assert "#0 : " in output and "***" in output
    assert leaks(sweep_dir, proc) == [], output[-3000:]


def test_the_wandb_run_files_hold_no_password(tmp_path, monkeypatch):
    import pandas as pd

    from harness.runlog.wandb_logger import WandbLogger
    from tests.conftest import compose_cfg

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    cfg = compose_cfg(["logger=wandb", "cache.url='postgresql://harness:Wandb0Secret@127.0.0.1:1/db?sslmode=disable'"])
    rows = pd.DataFrame({"question_id": ["q1"], "question": ["?"], "gold_answers": ['["a"]'], "answer": ["a"]})
    summary = {"run": {"packer": "packed"}, "metrics": {}, "n_questions": 1}
    WandbLogger(mode="offline").log_run(cfg, rows, summary, tmp_path)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in files)  # the file `wandb sync` uploads
    assert [p for p in files if b"Wandb0Secret" in p.read_bytes()] == []
