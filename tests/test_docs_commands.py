"""README.md and docs/ stay true: every command in them is composed or run, every config group, option and key
they name exists, every page is in the index and the site's nav, and the README stays a landing page.

- Each `python -m harness ...` line is composed as Hydra would compose it (each job of a `-m` sweep); those
  that run on the demo data or a file present here, with the basic launcher and a CPU reader, also run, with
  `read=false logger=none` and their output folders in a temporary directory, all in one process.
- Each `python -m harness.report ...` (and `view`, `replicate`) and `python -m harness.runlog.wandb_report`
  line runs on the small sweep those runs made.
- `make TARGET` names a Makefile target, `pip install -e '.[EXTRA]'` an extra of pyproject.toml, a
  `python -m harness.X` module exists, and anything else is a program the page tells the reader to have.
- An inline `group=option` or `group.key=value` in the prose names an option or key that exists.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from pathlib import Path

import pandas as pd
import pytest
import tomllib
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tests.conftest import CONF, REPO
from tests.helpers.built_once import built_once
from tests.helpers.doc_commands import (
    PAGES,
    Command,
    all_commands,
    harness_commands,
    overrides,
    run_in_one_process,
    sweep_points,
)

README_LIMIT = 15 * 1024
INDEX = REPO / "docs" / "index.md"
# Programs a page may tell the reader to run that are not part of this repository.
EXTERNAL = {
    "chgrp", "chmod", "createdb", "createuser", "curl", "export", "for", "llama-server", "mkdir", "ray",
    "text-generation-launcher",
    "umask", "vllm", "wandb",
}  # fmt: skip
# Outputs the pages' commands write, mapped into the test's temporary folder.
SWEEP_KEYS = ("hydra.sweep.dir=", "hydra.run.dir=")
SMALL_SWEEP = "first-study"


def compose_overrides(arguments: list[str], hydra: bool = True):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=arguments, return_hydra_config=hydra)


def command_id(command: Command) -> str:
    return f"{command.page}: {command}"[:90]


# ----------------------------------------------------------------------------------------------------------
# the pages


# The papers by title (and the authors their texts give), as the README names them beside the short names.
PAPER_TITLES = {
    "seed 000": "Recall Is Not Enough: A Reader-Context Diagnostic for Budget-Constrained "
    "Retrieval-Augmented Generation",
    "seed 001": "Finding the Right Balance: Relevance and Diversity in LLM Retrieval",
    "seed 002": "DTCRS: Dynamic Tree Construction for Recursive Summarization",
}
PAPER_AUTHORS = ("Ananto Nayan Bala", "Guillaume Brouillette, Faustin Kagabo, Usef Faghihi, Nadia Ghazzali")


def test_the_readme_is_a_landing_page_that_names_the_papers():
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) <= README_LIMIT, f"README.md is {len(readme.encode())} bytes"
    readme = " ".join(readme.split())  # titles and author lists may wrap
    for short, title in PAPER_TITLES.items():
        assert f"**{short}**: *{title}*" in readme, short
    for authors in PAPER_AUTHORS:
        assert authors in readme
    assert "RAPTOR: Recursive Abstractive Processing for Tree-Organized Retrieval" in readme
    assert "Luo et al" not in readme  # DTCRS's text we hold names no authors: none is invented
    for command in ("make run", "make test", "python -m harness.report"):
        assert command in readme
    assert "docs/index.md" in readme


# Where the default reader's backend and precision are stated; every other page links there instead.
DEFAULT_READER_PAGE = "readers.md"
BACKEND_WORDS = re.compile(r"llama\.cpp|float32|bfloat16|\bbf16\b|transformers")


def test_the_default_reader_s_backend_is_stated_on_one_page():
    """A sentence that speaks of the default reader outside docs/readers.md links to it rather than naming a
    backend or precision of its own (the pages once disagreed: llama.cpp, bf16 and float32)."""
    for page in PAGES:
        if page.name in (DEFAULT_READER_PAGE, "configuration.md"):  # configuration.md: the configs' own comments
            continue
        text = " ".join(page.read_text(encoding="utf-8").split())
        for sentence in re.split(r"(?<=[.:])\s|\|", text):  # sentences and table cells
            if re.search(r"default reader|offline default", sentence) and BACKEND_WORDS.search(sentence):
                assert f"{DEFAULT_READER_PAGE}#the-default-reader" in sentence, f"{page.name}: {sentence[:200]}"


# Measured figures and the one page that states each (with its machine, date and command); other pages link
# there. Generated pages (configuration.md from the configs, replication.md from the studies) are not counted.
ONE_PAGE_FIGURES = {
    r"24\.47 GB": "gpu-plan.md",  # Qwen2.5-7B's device peak in the plan's calibration run
    r"24\.29 GB": "gpu.md",  # the same, in the GPU check's later run
    r"\b\d[\d,]* tests in \d+ min": "architecture.md",  # the suite's time
    r"(?<![\d.])2\.21(?![\d])": "readers.md",  # the default reader through llama.cpp, s/question
    r"(?<![\d.])5\.24?x": "readers.md",  # the bf16 row reader against llama.cpp
}


@pytest.mark.parametrize("figure", sorted(ONE_PAGE_FIGURES))
def test_a_measured_figure_is_stated_on_one_page(figure):
    stated = {
        page.name
        for page in PAGES
        if page.name not in ("configuration.md", "replication.md")
        and re.search(figure, " ".join(page.read_text(encoding="utf-8").split()))
    }
    assert stated == {ONE_PAGE_FIGURES[figure]}, f"{figure!r} stated on {sorted(stated)}"


def test_every_page_is_in_the_index_and_the_site_nav():
    pages = {p.name for p in (REPO / "docs").glob("*.md")} - {"index.md"}
    linked = set(re.findall(r"\]\(([\w-]+\.md)(?:#[\w-]+)?\)", INDEX.read_text()))
    assert pages <= linked, f"not linked from docs/index.md: {sorted(pages - linked)}"
    nav = OmegaConf.load(REPO / "mkdocs.yml").nav
    in_nav = {next(iter(entry.values())) for entry in nav}
    assert pages | {"index.md"} <= in_nav, f"not in mkdocs.yml's nav: {sorted(pages - in_nav)}"


def test_the_site_is_built_in_strict_mode_by_make_lint():
    makefile = (REPO / "Makefile").read_text()
    lint = makefile[makefile.index("\nlint:") :].split("\n\n")[0]
    assert "mkdocs build --strict" in lint
    assert OmegaConf.load(REPO / "mkdocs.yml").site_dir.startswith("build/")  # git-ignored


# ----------------------------------------------------------------------------------------------------------
# commands that are not the harness's own


def test_every_make_target_exists():
    targets = set(re.findall(r"^([a-z][\w.-]*):", (REPO / "Makefile").read_text(), flags=re.M))
    named = {c.arguments[0] for c in all_commands() if c.program == "make"}
    named |= {m for page in PAGES for m in re.findall(r"`make ([a-z][\w.-]*[\w])", page.read_text())}
    assert named and named <= targets, sorted(named - targets)


def test_every_extra_it_installs_exists():
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = {
        extra
        for page in PAGES
        for extra in re.findall(r"pip install -e '\.\[(\w+)\]'", page.read_text())
    }  # fmt: skip
    assert named and named <= extras, sorted(named - extras)


@pytest.mark.parametrize(
    "command",
    [c for c in all_commands() if c.module != "harness"],
    ids=command_id,
)
def test_every_other_command_names_something_that_exists(command):
    module = command.module
    if module is not None and module.startswith("harness"):
        assert importlib.util.find_spec(module) is not None, module
    elif module is not None or command.program in ("python", "python3", ".venv/bin/python"):
        script = command.words[1]
        if script.endswith(".py"):
            assert (REPO / script).is_file(), script
        elif module is not None and module not in ("sglang.launch_server",):
            raise AssertionError(f"unknown module {module}")
    elif command.program == "pip":
        assert command.words[1:3] == ("install", "-e"), command
    else:
        assert command.program in EXTERNAL | {"make"}, f"unknown program {command.program!r} in {command.page}"


# ----------------------------------------------------------------------------------------------------------
# python -m harness: composed, and run where it can run here


@pytest.mark.parametrize("command", harness_commands(), ids=command_id)
def test_each_harness_command_composes(command):
    arguments = overrides(command)
    points = sweep_points(["-m", *arguments]) if "-m" in command.arguments else [arguments]
    for point in points:
        cfg = compose_overrides(point)  # an unknown group, option or key fails here
        for override in point:
            key, _, value = override.partition("=")
            if "/" not in key and "." in key and not key.startswith("~"):
                expected = OmegaConf.create({"value": value}).value if value else None
                found = OmegaConf.select(cfg, key.lstrip("+"), throw_on_resolution_failure=False)
                assert found == expected or OmegaConf.is_config(found) or isinstance(expected, str), override


def runs_here(command: Command) -> bool:
    """Whether the command runs on this machine in seconds with read=false: the demo data or a dataset file
    present here, at most six jobs, the basic launcher, no summary tree and a reader that needs no GPU or server."""
    arguments = overrides(command)
    points = sweep_points(["-m", *arguments]) if "-m" in command.arguments else [arguments]
    if len(points) > 6 or any(a.startswith(("hydra/launcher=", "+sweeps=", "experiment=")) for a in arguments):
        return False
    cfg = compose_overrides(points[0], hydra=False)
    path = cfg.dataset.get("path")
    data_here = cfg.dataset.name == "demo" or (path is not None and (REPO / str(path)).is_file())
    reader = cfg.reader
    cpu_reader = reader.get("trainer", {}).get("accelerator", "cpu") == "cpu" and "server" not in reader._target_
    return data_here and cpu_reader and cfg.tree.name == "none"


def output_name(argument: str) -> str:
    return Path(argument.partition("=")[2]).name


def runnable(command: Command, tmp: Path) -> dict:
    """The command as the test runs it: reader-free, no W&B, outputs and cache under ``tmp``."""
    kept = [a for a in command.arguments if not a.startswith(("read=", "logger=", "logger.", *SWEEP_KEYS))]
    named = [output_name(a) for a in command.arguments if a.startswith(SWEEP_KEYS)]
    folder = tmp / (named[0] if named else f"run-{abs(hash(str(command))) % 10**8}")
    key = "hydra.sweep.dir" if "-m" in command.arguments else "hydra.run.dir"
    return {
        "argv": ["harness", *kept, "read=false", "logger=none", f"{key}={folder}", f"paths.cache_dir={tmp / 'cache'}"],
        "env": {"HARNESS_CACHE_DIR": str(tmp / "cache")},
    }


@pytest.fixture(scope="module")
def doc_runs(tmp_path_factory) -> Path:
    """Every harness command that runs here, run once in one process (for both test workers); the folder
    holding their outputs."""

    def build(tmp: Path) -> None:
        commands = list({str(c): c for c in harness_commands() if runs_here(c)}.values())
        jobs = [runnable(c, tmp) for c in commands]
        env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
        statuses = run_in_one_process(jobs, REPO, env, timeout=85)
        failed = [str(c) for c, status in zip(commands, statuses, strict=True) if status != 0]
        assert not failed, failed
        assert (tmp / SMALL_SWEEP / "0" / "rows.parquet").is_file()

    return built_once(tmp_path_factory, "doc-runs", build)


@pytest.mark.process
def test_the_first_study_and_every_demo_command_run(doc_runs):
    runs = sorted(p.parent for p in doc_runs.rglob("rows.parquet"))
    assert len(runs) >= 8
    assert len(list((doc_runs / SMALL_SWEEP).glob("*/rows.parquet"))) == 6  # two packers at three budgets


# ----------------------------------------------------------------------------------------------------------
# python -m harness.report and the W&B report run, on the small sweep


def report_job(command: Command, runs: Path, out: Path) -> dict:
    """The command with its folders mapped into the test's: a sweep the pages made here is used as it is,
    any other (a reader study, a benchmark file not present here, a placeholder) is the small sweep."""
    arguments, mapped = command.arguments, []
    for index, argument in enumerate(arguments):
        previous = arguments[index - 1] if index else ""
        if previous == "--out":
            mapped.append(str(out / Path(argument).name))
        elif argument.startswith("outputs/") or argument in ("SWEEP", "DIR"):
            folder = runs / Path(argument).name
            mapped.append(str(folder if (folder / "0" / "rows.parquet").is_file() else runs / SMALL_SWEEP))
        else:
            mapped.append(argument)
    if command.module == "harness.report" and mapped[:1] not in (["view"], ["replicate"], ["diff"]):
        if "--out" not in mapped:
            mapped += ["--out", str(out / f"report-{len(list(out.iterdir()))}")]
        mapped = [a for i, a in enumerate(mapped) if a != "--resamples" and mapped[i - 1] != "--resamples"]
        mapped += ["--resamples", "200", "--quiet"]
    if command.module == "harness.runlog.wandb_report":
        mapped += ["--resamples", "200", "--mode", "offline"]
    return {"argv": [command.module, *mapped], "env": {"WANDB_DIR": str(out)}}


def report_commands() -> list[Command]:
    commands = [c for c in all_commands() if c.module in ("harness.report", "harness.runlog.wandb_report")]
    return list({str(c): c for c in commands}.values())


@pytest.mark.process
def test_every_report_command_runs_on_the_small_sweep(doc_runs, tmp_path):
    commands = [c for c in report_commands() if c.arguments[:1] != ["replicate"]]
    assert any(c.module == "harness.runlog.wandb_report" for c in commands)
    jobs = [report_job(c, doc_runs, tmp_path) for c in commands]
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    statuses = run_in_one_process(jobs, REPO, env, timeout=85)
    failed = [str(c) for c, status in zip(commands, statuses, strict=True) if status != 0]
    assert not failed, failed
    assert list(tmp_path.rglob("contrasts.csv")) and list(tmp_path.rglob("viewer.html"))
    # What docs/first-study.md says of it: without answers the packers are compared on answer-in-context,
    # each question paired with itself within a budget.
    first = (tmp_path / "report-0" / "report.md").read_text()
    assert "Paired contrasts against the baseline (answer in ctx)" in first
    contrasts = pd.read_csv(tmp_path / "report-0" / "contrasts.csv")
    assert sorted(contrasts.budget) == [96, 128, 160] and set(contrasts.n) == {12}


@pytest.mark.process
def test_every_replicate_command_runs(tmp_path):
    commands = [c for c in report_commands() if c.arguments[:1] == ["replicate"]]
    inline = {
        m for page in PAGES for m in re.findall(r"`python -m harness\.report replicate([^`]*)`", page.read_text())
    }
    jobs = [
        {"argv": ["harness.report", "replicate", *c.arguments[1:], "--studies", str(tmp_path / "none"),
                  "--out", str(tmp_path / "replication.md")]}
        for c in commands
    ] + [{"argv": ["harness.report", "replicate", *extra.split(), "--studies", str(tmp_path / "none"),
                   "--out", str(tmp_path / "replication.md")]} for extra in sorted(inline)]  # fmt: skip
    assert jobs
    statuses = run_in_one_process(jobs, REPO, dict(os.environ), timeout=85)
    assert statuses == [0] * len(jobs)


# ----------------------------------------------------------------------------------------------------------
# the config groups, options and keys the prose names


def groups() -> dict[str, set[str]]:
    """Each config group (``reader``, ``sweeps``, ``sweeps/packing_ablation``, ``hydra/launcher``) and its options."""
    found: dict[str, set[str]] = {}
    # conf/sweeps links to sweeps/, which rglob does not follow
    for root, prefix in ((CONF, ""), (REPO / "sweeps", "sweeps/")):
        for path in root.rglob("*.yaml"):
            group = prefix + path.parent.relative_to(root).as_posix()
            if group not in (".", "sweeps/."):
                found.setdefault(group.removesuffix("/."), set()).add(path.stem)
    return found


@functools.cache
def composed(group: str, option: str):
    return compose_overrides([f"{group}={option}"], hydra=False)


@functools.lru_cache(maxsize=1)
def default_config():
    return compose_overrides([], hydra=True)


def has_path(config, key: str) -> bool:
    """Whether ``key`` is a path of ``config`` (whatever its value, null and unresolved interpolations included)."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(config, parent, throw_on_resolution_failure=False) if parent else config
    return node is not None and OmegaConf.is_dict(node) and leaf in node


def key_exists(key: str) -> bool:
    """Whether ``key`` is in the default config, or in the config with some option of its group chosen."""
    if has_path(default_config(), key):
        return True
    head = key.split(".")[0]
    if head == "hydra":
        launchers = ("slurm", "ray_local", "local_parallel", "submitit_local")
        return any(has_path(compose_overrides([f"hydra/launcher={name}"]), key) for name in launchers)
    return any(has_path(composed(head, option), key) for option in sorted(groups().get(head, ())))


def inline_overrides(page: Path) -> list[str]:
    """The ``key=value`` words of the page's inline code spans (outside fenced blocks)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    words = []
    for span in re.findall(r"`([^`\n]+)`", text):
        if span.startswith(("python -m harness.report", "python -m harness.plan", "python -m harness.cache")):
            continue
        for word in span.split():
            key, equals, value = word.partition("=")
            if key.startswith("+") and key[1:] not in groups():
                continue  # a key added to the config: composed where a command uses it
            key = key.lstrip("+~")
            if equals and value and re.fullmatch(r"[a-z][\w./]*", key) and not key.startswith("cfg."):
                words.append(f"{key}={value}")
    return words


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_group_option_and_key_it_names_exists(page):
    known = groups()
    problems = []
    for word in inline_overrides(page):
        key, _, value = word.partition("=")
        if key in known or "/" in key:
            options = known.get(key, set())
            named = [v for v in value.split(",") if v and v.replace("_", "").replace(".", "").isalnum()]
            if key.startswith("hydra/"):
                continue  # the launchers' plugins bring options of their own; commands with them are composed
            problems += [f"{key}={v}" for v in named if v not in options and v.upper() != v]
        elif "." in key and not key_exists(key):
            problems.append(word)
    assert not problems, f"{page.name} names what does not exist: {problems}"
