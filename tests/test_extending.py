"""docs/extending.md, followed from a project outside harness/: the page is the test.

Every fenced block of the page preceded by ``<!-- file: PATH -->`` is written to PATH under a temporary project
folder (the package ``rag_ext`` under ``src/``, its configs under ``conf/``, a data file), so the code that runs
is the page's, never a copy. Each ``<!-- command -->`` block is composed as the harness would compose it, and the
``<!-- command: end-to-end -->`` block is run line by line through bash in that folder; the rows are checked
against what each extension must have done.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "extending.md"
BLOCK = re.compile(r"^<!-- (?P<marker>[^>]*?) -->\n```(?P<language>\w*)\n(?P<body>.*?)^```$", re.M | re.S)
# The component kinds the page must give code, a config and a command for, by the config group each one fills.
KINDS = {"packer": "packer", "diversifier": "diversifier", "tree": "tree", "reranker": "reranker"}
KINDS |= {"reader": "reader", "dataset format": "dataset", "metric": "dataset"}


def blocks(kind: str) -> list[tuple[str, str, str]]:
    """(marker argument, language, body) of the page's blocks whose marker is ``kind`` (``file``, ``command``)."""
    found = []
    for match in BLOCK.finditer(PAGE.read_text(encoding="utf-8")):
        name, _, argument = match["marker"].partition(":")
        if name.strip() == kind:
            found.append((argument.strip(), match["language"], match["body"]))
    return found


def sections() -> dict[str, str]:
    """The page's ``## `` sections by their heading (lower case)."""
    parts = re.split(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), flags=re.M)
    return {heading.strip().lower(): body for heading, body in zip(parts[1::2], parts[2::2], strict=True)}


def write_project(root: Path) -> dict[str, Path]:
    """The page's files under ``root``; returns them by their path on the page."""
    written = {}
    for path, _, body in blocks("file"):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
        written[path] = target
    return written


def command_words(line: str, root: Path) -> tuple[dict[str, str], list[str]]:
    """(leading VAR=value assignments, the rest) of one command line, with $PWD the project folder."""
    words = shlex.split(line.replace("$PWD", str(root)))
    env = {}
    while words and re.match(r"^[A-Z_]+=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


def strings(value) -> list[str]:
    """Every string in a config's values, nested ones included."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def defines(source: Path, name: str) -> bool:
    tree = ast.parse(source.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name for node in tree.body)


def test_every_component_kind_has_code_a_config_and_a_command():
    by_heading = sections()
    for kind in KINDS:
        heading = next((h for h in by_heading if kind in h), None)
        assert heading is not None, f"no section on a {kind}"
        body = by_heading[heading]
        assert re.search(r"<!-- file: src/rag_ext/\w+\.py -->\n```python", body), f"{heading}: no code"
        assert re.search(r"<!-- file: conf/\w+/\w+\.yaml -->\n```yaml", body), f"{heading}: no config"
        assert re.search(r"<!-- command -->\n```sh", body), f"{heading}: no command"
    assert [argument for argument, _, _ in blocks("command") if argument] == ["sweep", "end-to-end"]


def test_each_command_composes_and_names_the_page_s_code(tmp_path):
    files = write_project(tmp_path)
    commands = [body for argument, _, body in blocks("command") if not argument]
    assert len(commands) == len(set(KINDS.values())) + 1  # the metric and the dataset format both fill dataset
    for command in commands:
        env, words = command_words(command.strip(), tmp_path)
        assert env == {"PYTHONPATH": "src"} and words[:3] == ["python", "-m", "harness"], command
        overrides = words[3:]
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose(config_name="config", overrides=overrides)
        for override in overrides:
            group, _, option = override.partition("=")
            if f"conf/{group}/{option}.yaml" not in files:
                continue
            # The option composed from the page's config names code the page defines (by _target_ or scorers).
            named = [v for v in strings(OmegaConf.to_container(cfg[group])) if v.startswith("rag_ext.")]
            assert named, f"{override} names no code of the page"
            for reference in named:
                module, _, name = reference.rpartition(".")
                source = tmp_path / "src" / Path(*module.split(".")).with_suffix(".py")
                assert source.is_file() and defines(source, name), f"{override}: {reference} is not on the page"
    demo_words = OmegaConf.select(cfg, "dataset")  # the last command: the metric on the demo questions
    assert demo_words.name == "demo" and list(demo_words.scorers) == ["rag_ext.metrics.answer_words"]


def run_line(line: str, root: Path) -> None:
    """One command line of the page, run by bash in the project folder, with ``python`` this interpreter.

    Nothing tells the run where the models are (no ``HARNESS_MODELS_DIR``): it must find the ones ``make setup``
    converted in the harness's checkout, as a user's own project does. The cache goes to the test's folder."""
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    python = bin_dir / "python"
    if not python.exists():  # a script, not a link: a link outside the venv would lose the venv's packages
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        python.chmod(0o755)
    environment = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        HARNESS_CACHE_DIR=str(root / "cache"),
        WANDB_MODE="disabled",
    )
    environment.pop("HARNESS_MODELS_DIR", None)
    done = subprocess.run(["bash", "-c", line], cwd=root, env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{line}\n{done.stderr[-4000:]}"


@pytest.mark.slow
def test_the_page_followed_from_outside_the_package_runs_end_to_end(tmp_path):
    files = write_project(tmp_path)
    records = [json.loads(line) for line in files["data/toyqa_dev.jsonl"].read_text().splitlines()]
    (end_to_end,) = [body for argument, _, body in blocks("command") if argument == "end-to-end"]
    harness_line, report_line = end_to_end.strip().splitlines()
    _, words = command_words(harness_line, tmp_path)
    settings = dict(w.split("=", 1) for w in words[3:])
    budget, k = int(settings["budget"]), int(settings["k"])
    run_line(harness_line, tmp_path)
    out = tmp_path / settings["hydra.run.dir"]
    rows = pd.read_parquet(out / "rows.parquet")

    # The dataset format: every record loaded, with its own ids, answers and gold passages.
    assert rows["question_id"].tolist() == [r["qid"] for r in records]
    assert [json.loads(a) for a in rows["gold_answers"]] == [[r["reply"]] for r in records]
    assert set(rows["dataset"]) == {"toyqa"} and set(rows["split"]) == {"dev"}
    assert (rows["hops"] == [len(r["gold"]) for r in records]).all()
    # The reranker: chosen by its config, ahead of every later stage.
    assert set(rows["reranker"]) == {"word_overlap"}
    # The tree: one summary node added to each pool, its facts as tree.* columns.
    assert set(rows["tree"]) == {"title_digest"} and (rows["tree.summary_nodes"] == 1).all()
    assert rows["n_candidates"].tolist() == [len(r["passages"]) + 1 for r in records]
    # The diversifier: every second candidate of the pool, at most k of them.
    assert set(rows["diversifier"]) == {"every_other"}
    assert rows["n_selected"].tolist() == [min(k, math.ceil(n / 2)) for n in rows["n_candidates"]]
    # The packer: within budget, its own column filled, as many snippets as it says it chose.
    assert set(rows["packer"]) == {"most_relevant"} and (rows["context_tokens"] <= budget).all()
    assert (rows["pack.chosen"] == rows["n_snippets"]).all() and (rows["n_snippets"] > 0).all()
    # The reader backend: its answers, from the very context each row shows, under its own id.
    assert set(rows["reader"]) == {"lead-words"}
    assert rows["raw_answer"].tolist() == [" ".join(c.split()[:3]) for c in rows["context"]]
    # The metric: a column per question, equal to what the scorer computes on the answer, in the summary too.
    assert rows["answer_words"].tolist() == [len(a.split()) for a in rows["answer"]]
    assert "answer_words" in json.dumps(json.loads((out / "summary.json").read_text()))

    # The report section: imported by --import, built from the rows, written beside the built-in ones.
    run_line(report_line, tmp_path)
    report = out / "report"
    table = pd.read_csv(report / "answer_lengths.csv")
    assert table.to_dict("records") == [{"packer": "most_relevant", "answer_words": rows["answer_words"].mean()}]
    assert "## Answer length by packer" in (report / "report.md").read_text()


def test_paths_resolve_to_the_harness_checkout_from_any_folder(tmp_path, monkeypatch):
    """``paths.models_dir`` and ``paths.cache_dir`` name the checkout's folders whatever the launch folder; the
    environment variables still win."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_MODELS_DIR", raising=False)
    monkeypatch.delenv("HARNESS_CACHE_DIR", raising=False)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        paths = compose(config_name="config").paths
    assert (paths.models_dir, paths.cache_dir) == (str(REPO / ".cache/models"), str(REPO / ".cache/harness"))
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "models"))
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        assert compose(config_name="config").paths.models_dir == str(tmp_path / "models")


@pytest.mark.slow
def test_the_page_s_sweep_runs_from_a_folder_outside_the_repository(tmp_path):
    assert not tmp_path.resolve().is_relative_to(REPO)
    write_project(tmp_path)
    (sweep,) = [body for argument, _, body in blocks("command") if argument == "sweep"]
    harness_line, report_line = sweep.strip().splitlines()
    _, words = command_words(harness_line, tmp_path)
    settings = dict(w.split("=", 1) for w in words[3:] if "=" in w)
    run_line(harness_line, tmp_path)
    out = tmp_path / settings["hydra.sweep.dir"]
    rows = pd.concat([pd.read_parquet(p) for p in sorted(out.glob("*/rows.parquet"))])
    packers, budgets = settings["packer"].split(","), [int(b) for b in settings["budget"].split(",")]
    assert sorted(set(zip(rows["packer"], rows["budget"], strict=True))) == sorted(
        (p, b) for p in packers for b in budgets
    )
    assert (rows["context_tokens"] <= rows["budget"]).all()
    # The models came from the checkout: nothing was made for them in the project folder.
    assert not (tmp_path / ".cache").exists()
    run_line(report_line, tmp_path)
    assert "most_relevant" in (out / "report" / "report.md").read_text()
