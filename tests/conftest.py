"""Shared fixtures: hand-built records, a deterministic stand-in encoder and the composed Hydra config."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from harness.core.types import Candidate, Document, Example, Pool
from harness.run.sweep_compose import compose_once
from tests.helpers import cores


def pytest_configure(config) -> None:
    """Under pytest-xdist each worker keeps to its own share of the CPUs, and the runs it starts inherit it.
    Otherwise every worker's torch, llama.cpp and vLLM take all the cores at once: two workers on two cores
    ran four compute threads on two, and a bf16 read on AMX slowed several-fold (a test of three demo runs
    took 474 s). The harness sizes its threads from this affinity (harness.core.threads)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not worker.startswith("gw") or not count.isdigit() or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    cores.SUITE_CPUS = set(cpus)  # for the tests whose processes must run side by side (tests/helpers/cores.py)
    index, workers = int(worker[2:]), int(count)
    if len(cpus) >= workers > 1:
        os.sched_setaffinity(0, cpus[index::workers])


from tests.helpers import process_guard  # noqa: E402

process_guard.install()


# Modules whose tests share one engine, started by a module fixture (tens of seconds on a CPU). They are run
# first: work stealing hands a worker the start of the collection and takes tests only from the end of a
# worker's queue, so their tests stay on one worker and the engine starts once. (Split by a steal, the vLLM
# replicas test started a second engine on the other worker: 93 s instead of 40. `--dist loadgroup` kept
# them together but ran every module-fixture group first, side by side: the suite took 18 min, not 16.)
ENGINE_MODULES = ("test_read_vllm.py", "test_read_vllm_invariance.py")


def pytest_collection_modifyitems(config, items) -> None:
    process_guard.mark_fixture_processes(items)
    items.sort(key=lambda item: item.path.name not in ENGINE_MODULES)  # stable: each keeps its order


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    with process_guard.watching(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with process_guard.watching(item):
        yield


REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
CONF = REPO / "conf"

# Every dataset config reads its default path under paths.data_dir: in the tests, the samples beside the
# repository under the names a fetch gives the official files (tests/helpers/shared_data.py). Set before any
# test composes a config or starts a run, which inherit it.
from tests.helpers.shared_data import samples_data_dir  # noqa: E402

os.environ["HARNESS_DATA_DIR"] = str(samples_data_dir(REPO / ".cache" / "test-data"))

# The encoders' vectors, one store for every run of the suite (paths.embeddings_dir): a harness process embedding
# the demo set afresh imported sentence-transformers, loaded MiniLM and encoded, 3 s of its 8. The process that
# runs the suite makes the folder and its xdist workers inherit it; it is removed when the suite ends. Tests of the
# cache itself keep the vectors in their runs' own cache folders (`EMBEDDINGS_ENV`).
EMBEDDINGS_ENV = "HARNESS_EMBEDDINGS_DIR"
if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ[EMBEDDINGS_ENV] = tempfile.mkdtemp(prefix="harness-test-embeddings-")


def pytest_unconfigure(config) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ:
        shutil.rmtree(os.environ.pop(EMBEDDINGS_ENV, ""), ignore_errors=True)


# The tests' reader unless a test names another: the 135M model through transformers, seconds per demo run.
# The published default (conf/config.yaml) is the stronger Qwen2.5-Coder-0.5B GGUF.
TINY_READER = "reader=smollm2_135m"


def with_tiny_reader(overrides: list[str] | tuple[str, ...]) -> list[str]:
    """``overrides`` plus ``TINY_READER`` when they choose no reader themselves."""
    overrides = list(overrides)
    names_a_reader = any(o.lstrip("+~").startswith(("reader=", "reader@")) for o in overrides)
    # Appended: a group choice applies before any key override whatever its place, and "-m" must stay first.
    return overrides if names_a_reader else [*overrides, TINY_READER]


def compose_cfg(
    overrides: list[str] | tuple[str, ...] = (),
    config_dir: Path = CONF,
    return_hydra_config: bool = False,
    tiny_reader: bool = True,
) -> DictConfig:
    """The config a run with these command-line overrides would get, composed without starting a job
    (with ``TINY_READER`` unless the overrides name a reader or ``tiny_reader`` is false)."""
    overrides = with_tiny_reader(overrides) if tiny_reader else list(overrides)
    compose_once()  # config files read once per process, as every run of the command line reads them
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=return_hydra_config)


class HashEncoder:
    """Maps each text to a fixed pseudo-random unit vector (same text, same vector), counting calls."""

    def __init__(self, dim: int = 16) -> None:
        self.dim = dim
        self.calls = 0
        self.requests = 0

    def encode(self, texts):
        self.requests += len(texts)
        self.calls += len(texts)
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=self.dim)
            rows.append(v / np.linalg.norm(v))
        return np.array(rows, dtype=np.float32).reshape(len(texts), self.dim)

    encode_documents = encode_queries = encode


def make_pool(n_docs: int = 6, gold=(0, 1), dim: int = 16, seed: int = 0, sentences_per_doc: int = 3) -> Pool:
    rng = np.random.default_rng(seed)
    docs = tuple(
        Document(
            f"q::{i}",
            f"Title {i}",
            tuple(f"Sentence {j} of document {i} says fact {i}-{j}." for j in range(sentences_per_doc)),
        )
        for i in range(n_docs)
    )
    example = Example("q", "Which fact?", ("fact 0-1",), tuple(f"q::{i}" for i in gold), docs, hops=len(gold))
    emb = rng.normal(size=(n_docs, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    query = rng.normal(size=dim).astype(np.float32)
    query /= np.linalg.norm(query)
    scores = emb @ query
    order = np.argsort(-scores, kind="stable")
    candidates = [
        Candidate(docs[i].doc_id, docs[i].text, (docs[i].doc_id,), docs[i].title, docs[i].sentences, float(scores[i]))
        for i in order
    ]
    return Pool(example, candidates, emb[order], query)


@pytest.fixture
def hash_encoder():
    return HashEncoder()


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """A real PostgreSQL server for the session (tests/helpers/postgres.py)."""
    from tests.helpers.postgres import postgres_server

    with postgres_server(tmp_path_factory.mktemp("postgres") / "data") as url:
        yield url


@pytest.fixture(scope="session")
def chromium_session(tmp_path_factory):
    """One headless Chromium WebDriver per test process (tests/helpers/browser.py); fails without `make browser`."""
    from tests.helpers.browser import chromium_driver, missing_browser

    if (reason := missing_browser()) is not None:
        pytest.fail(reason, pytrace=False)
    with chromium_driver(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


@pytest.fixture
def chromium(chromium_session):
    """A fresh tab of the shared driver: ``BrowserPage`` with open, console_errors and screenshot."""
    from tests.helpers.browser import BrowserPage

    return BrowserPage(chromium_session)


@pytest.fixture
def cache_with_shared_plan(tmp_path, tmp_path_factory) -> Path:
    """``tmp_path/cache``, empty but for ``plan/``: the suite's one folder of the planner's parameter counts
    (harness.plan.facts_cache). Counting a model config on the meta device imports transformers and torch, 5 to
    10 s a process; shared, each config is counted by whichever test asks first. Entries are named by the config's
    bytes and the counting code and written by an atomic rename, so the workers share them safely. Tests of a cold
    plan keep a cache of their own."""
    from harness.plan.facts_cache import SUBDIR
    from tests.helpers.built_once import session_folder

    shared = session_folder(tmp_path_factory, "plan-facts")
    shared.mkdir(exist_ok=True)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / SUBDIR).symlink_to(shared, target_is_directory=True)
    return cache
