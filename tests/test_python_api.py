"""The harness from Python (docs/python.md): ``harness.run`` is the command line's run in this process (same rows,
same folder, same errors, models and caches shared by a second call), ``harness.sweep`` its basic-launcher sweep,
``harness.load_runs`` and ``harness.compare`` the report's rows and contrasts; the page's code runs as written."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import harness
from tests.conftest import REPO
from tests.helpers.doc_commands import fenced_blocks

PAGE = REPO / "docs" / "python.md"
DEMO = ["read=false", "logger=none"]
# Where a row says which folders the run used: equal runs launched with other environments may differ there.
PATH_SUFFIXES = ("cache_dir", "models_dir", "embeddings_dir", "data_dir")


def command_line(module: str, *args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def computed_columns(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[[c for c in rows.columns if not c.startswith("cfg.paths.") and not c.endswith(PATH_SUFFIXES)]]


@pytest.mark.process
def test_harness_stays_cheap_to_import():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, harness; print(sorted({'pandas', 'torch', 'hydra'} & set(sys.modules)))"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "[]"


def test_a_bad_override_is_a_named_error_before_anything_loads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    start = time.perf_counter()
    with pytest.raises(harness.ConfigError) as caught:
        harness.run(["packer=nosuch"])
    assert time.perf_counter() - start < 2
    assert isinstance(caught.value, harness.OverrideError)
    assert "packer" in str(caught.value) and "nosuch" in str(caught.value)
    assert not (tmp_path / "outputs").exists()  # Hydra composed nothing, so no run folder

    # A value out of range: the command line's own line (after "config error: "), raised, not an exit.
    with pytest.raises(harness.ConfigError) as caught:
        harness.run(["budget=0", *DEMO])
    assert caught.value.problems == ["budget=0 is out of range; allowed: an integer >= 1 (reader tokens)"]
    assert time.perf_counter() - start < 4

    with pytest.raises(harness.ConfigError, match="harness.sweep"):
        harness.run(["-m", "budget=96,160"])
    with pytest.raises(harness.ConfigError, match="Ambiguous value for argument 'budget=96,160'"):
        harness.run(["budget=96,160"])  # a sweep value in a single run: Hydra's message


def test_a_sweep_on_another_launcher_stays_the_command_line_s():
    with pytest.raises(harness.ConfigError, match="hydra/launcher=local_parallel: harness.sweep runs Hydra's basic"):
        harness.sweep(["hydra/launcher=local_parallel", *DEMO])
    with pytest.raises(TypeError, match="a list of strings"):
        harness.sweep("packer=packed,submod")  # type: ignore[arg-type]


@pytest.mark.slow  # two in-process runs with the real MiniLM encoder, and the command line's run
@pytest.mark.process
def test_two_runs_in_one_process_equal_the_command_line_s_and_share_what_they_loaded(tmp_path, monkeypatch, capsys):
    env = {"HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    cli = command_line("harness", *DEMO, f"hydra.run.dir={tmp_path / 'cli'}", cwd=tmp_path, env=env)
    assert "pack     packer=packed B=160" in cli.stdout + cli.stderr

    from harness.run import reuse

    monkeypatch.setenv("HARNESS_CACHE_DIR", env["HARNESS_CACHE_DIR"])
    monkeypatch.chdir(tmp_path)
    first = harness.run(DEMO)
    reader = reuse._instances["reader"][1]
    capsys.readouterr()
    second = harness.run(DEMO)
    said = capsys.readouterr().out

    # Where the command line puts a run: outputs/runs/DATE/TIME under the working directory, one each.
    for result in (first, second):
        assert result.folder.parent.parent == tmp_path / "outputs" / "runs"
        assert {"rows.parquet", "summary.json", "config.yaml", "cli.log", ".hydra"} <= {
            p.name for p in result.folder.iterdir()
        }
    assert first.folder != second.folder
    expected = computed_columns(pd.read_parquet(tmp_path / "cli" / "rows.parquet"))
    assert {"answer_in_context", "gold_doc_coverage", "context_tokens", "recall_at_k"} <= set(expected.columns)
    for result in (first, second):
        pd.testing.assert_frame_equal(computed_columns(result.rows), expected)
        assert result.summary["n_questions"] == len(expected) == 12
    assert second.summary["metrics"] == first.summary["metrics"]

    # The second run's stages are the first's objects (the reader and its tokenizer included) and nothing is
    # embedded again; its stage lines say what it reused.
    assert reuse._instances["reader"][1] is reader
    counters = second.summary["counters"]
    assert counters["encoder_texts_computed"] == 0
    assert counters["selections_reused"] == 1 and counters["packings_reused"] == 1
    assert "reused from a run with the same pools" in said and "pack     packer=packed B=160" in said


@pytest.mark.slow  # a four-job sweep with the real encoder, then the report's command line
@pytest.mark.process
def test_compare_on_a_sweep_equals_the_report_s_contrasts(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "sweep"
    rows = harness.sweep(["packer=packed,submod", "budget=96,160", *DEMO, f"hydra.sweep.dir={folder}"])
    # The command line's sweep folder: its multirun.yaml and one numbered folder per job.
    assert (folder / "multirun.yaml").is_file()
    for job in range(4):
        assert (folder / str(job) / "rows.parquet").is_file() and (folder / str(job) / ".hydra").is_dir()
    assert sorted(rows["policy"].unique()) == ["packer=packed", "packer=submod"]
    assert len(rows) == 4 * 12 and rows.attrs["harness.layout"].policy == ("packer",)
    pd.testing.assert_frame_equal(harness.load_runs(folder), rows)

    command_line("harness.report", str(folder), "--resamples", "200", "--quiet", "--no-plots", "--no-viewer",
                 "--out", str(tmp_path / "report"), cwd=tmp_path, env={})  # fmt: skip
    written = pd.read_csv(tmp_path / "report" / "contrasts.csv")
    assert sorted(written["budget"]) == [96, 160] and set(written["baseline"]) == {"packer=packed"}
    for contrasts in (
        harness.compare(rows, resamples=200),
        harness.compare(rows, metric="answer_in_context", baseline="packer=packed", resamples=200),
    ):
        assert {"mean_diff", "ci_low", "ci_high", "p_holm"} <= set(contrasts.columns)
        pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(contrasts.to_csv(index=False))), written)

    # A job that fails leaves error.txt, as on the command line; the others finish and load.
    failing = tmp_path / "failing"
    with pytest.raises(harness.JobsFailed, match="1 sweep job\\(s\\) failed") as caught:
        harness.sweep(["budget=0,96", *DEMO, f"hydra.sweep.dir={failing}"])
    assert caught.value.folder == failing and [job["num"] for job in caught.value.failed] == ["0"]
    assert "budget=0 is out of range" in (failing / "0" / "error.txt").read_text()
    assert set(harness.load_runs(failing)["budget"]) == {96}


@pytest.mark.slow  # the page's run and four-job sweep, in a process of their own
@pytest.mark.process
def test_the_python_page_runs_top_to_bottom(tmp_path):
    code = "\n".join(fenced_blocks(PAGE, "python"))
    assert "harness.run(" in code and "harness.sweep(" in code and "harness.compare(" in code
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "packers.png").stat().st_size > 10_000
    assert len(list((tmp_path / "outputs" / "runs").glob("*/*/rows.parquet"))) == 1
    assert len(list((tmp_path / "outputs" / "multirun").glob("*/*/*/rows.parquet"))) == 4
    assert "Could not find 'packer/nosuch'" in done.stdout
