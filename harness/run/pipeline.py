"""One evaluation run's stages in order: load -> retrieve -> perturb -> tree -> diversify -> pack -> read.

Every stage before ``read`` is reader-independent except token counting, and each is a pure function of
its config slice, so caches (embeddings, pools, reader responses) and the results jobs of one process
share (``harness.run.reuse`` under ``harness.run.keys``) make sweeps recompute only what changed. Row
building is ``harness.run.rows``; the job around the pipeline (journal, resume, outputs) ``harness.run.job``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from threadpoolctl import ThreadpoolController
from tqdm.auto import tqdm

from harness.cache import stable_hash
from harness.cache.fingerprint import identity_config
from harness.cache.pools import POOL_CONFIG_KEYS, PoolCache, pool_key
from harness.core.stage import stage_columns
from harness.core.types import Pool, Snippet
from harness.metrics import wordnet_corpus
from harness.metrics.diversity import selection_metrics
from harness.metrics.provenance import pool_column
from harness.metrics.registry import CONTEXT_TOKENS
from harness.pack.snippets import make_snippets
from harness.read.base import PromptRequest
from harness.run import keys
from harness.run.clock import StageClock
from harness.run.dataset_check import cache_folder, dataset_loader_config, load_examples  # noqa: F401 - re-exported
from harness.run.flags import RunFlags
from harness.run.packing import PROGRESS_DELAY, Selection, pack_selections
from harness.run.pools import compute_pools
from harness.run.reuse import content_digest, looked_up, shared_instance, shared_result
from harness.run.rows import Prepared
from harness.tree.base import TreeServices

log = logging.getLogger(__name__)


def k_exceeds_pools(k: int, pools: list[Pool]) -> str | None:
    """A warning when ``k`` is above every question's pool size: the diversifier then keeps the whole pool
    and recall@k is recall over the pool (the run is valid, but likely not what was meant)."""
    largest = max((len(pool.candidates) for pool in pools), default=0)
    if pools and k > largest:
        return (
            f"k={k} exceeds every question's pool (at most {largest} candidates): the diversifier keeps whole "
            f"pools and recall@k is recall over the pool; set k <= {largest} or retriever.pool_size"
        )
    return None


class Pipeline:
    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self.flags = RunFlags.of(cfg)
        wordnet_corpus.use_models_dir(cfg.paths.models_dir)  # METEOR's WordNet, installed by make setup
        # Stages built from the same resolved config as the previous job's are that job's objects
        # (harness.run.reuse): a sweep loads its tokenizer, encoder and reader once per process.
        resolved = self.resolved = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(resolved, dict)

        def shared(group: str, node: Any, build: Callable[[], Any]) -> Any:
            return shared_instance(group, node, lambda: build() if node else None)

        retriever = resolved["retriever"]
        self.encoder = shared("encoder", retriever["encoder"], lambda: instantiate(cfg.retriever.encoder))
        retriever_cfg = {k: v for k, v in cfg.retriever.items() if k != "encoder"}
        self.retriever = shared("retriever", retriever, lambda: instantiate(retriever_cfg, encoder=self.encoder))
        self.reranker = shared("reranker", resolved.get("reranker"), lambda: instantiate(cfg.reranker))
        self.perturbation = shared("perturb", resolved.get("perturb"), lambda: instantiate(cfg.perturb))
        self.tree = shared("tree", resolved["tree"], lambda: instantiate(cfg.tree))
        self.diversifier = shared("diversifier", resolved["diversifier"], lambda: instantiate(cfg.diversifier))
        self.packer = shared("packer", resolved["packer"], lambda: instantiate(cfg.packer))
        self.reader = shared("reader", resolved["reader"], lambda: instantiate(cfg.reader))
        # Counters of shared objects run across jobs: this run reports what it added to them.
        self._counter_start = self.counters()
        self.clock = StageClock()
        # 1 where this run's selections / packings were another run's in this process (harness.run.reuse).
        self.reused = {"selections": 0, "packings": 0}
        self.pools_digest: str | None = None

    @property
    def timings(self) -> dict[str, float]:
        return self.clock.timings

    def components(self) -> dict[str, str]:
        """The names of the run's tree, diversifier, packer and reader, and the reader's numerics (row columns)."""
        names = {kind: getattr(self, kind).name for kind in ("tree", "diversifier", "packer", "reader")}
        return {**names, "reader_numerics": self.reader.numerics_label}

    def counters(self) -> dict[str, int | None]:
        """Texts embedded and prompts read by this run (the shared objects' counters since it began)."""
        now = {
            "encoder_texts_requested": self.encoder.requests,
            "encoder_texts_computed": self.encoder.calls,
            "reader_prompts_requested": self.reader.requested,
            "reader_prompts_generated": self.reader.generated,
        }
        start = getattr(self, "_counter_start", None)
        if start is None:
            return now
        return {k: None if v is None else v - (start[k] or 0) for k, v in now.items()}

    def load(self):
        start = time.perf_counter()
        # Loaded once per process for the same loader config and file bytes: the config check read them
        # (harness.run.dataset_check), and every job of a sweep reads them.
        examples, self.examples_key = load_examples(self.cfg.dataset, cache_folder(self.cfg))
        self.loaded = examples
        self.clock.since("load", start)
        return examples

    def pools(self, examples) -> tuple[list[Pool], list[dict]]:
        """Retrieved (reranked, perturbed) pools and their clean retrieval metrics.

        Cached on disk (data only, no pickle) under a key of the examples' content, the retriever,
        reranker, perturbation, k and seed config and the pool stage's code fingerprint (``harness.cache.pools``),
        so a budget, packer, diversifier or reader sweep retrieves each pool once.
        """
        cfg, force = self.cfg, self.flags.force
        store = PoolCache(cfg.paths.cache_dir)
        # Hashing every example's content is the costly part of the key: once per loaded question set.
        if examples is getattr(self, "loaded", None):
            config = identity_config(cfg, POOL_CONFIG_KEYS)
            key = shared_result("pool_keys", stable_hash(self.examples_key, config), lambda: pool_key(cfg, examples))
        else:
            key = pool_key(cfg, examples)

        def load_or_compute() -> tuple[list[Pool], list[dict]]:
            if not force:
                cached = store.load(key)
                if cached is not None:
                    log.info("pools: reusing %s", store.where(key))
                    return cached
            stages = (self.retriever, self.reranker, self.perturbation, self.encoder)
            pools, retrieval = compute_pools(examples, *stages, cfg.k, cfg.seed, self.clock.since)
            store.save(key, pools, retrieval)
            return pools, retrieval

        # The same pools are read once per process (the key names the cache folder too: the memo is
        # process-wide); cache.force recomputes them.
        self.pools_key = stable_hash(key, store.where(key))
        if force:
            return load_or_compute()
        pools, retrieval = shared_result("pools", self.pools_key, load_or_compute)
        # The pools' content: seeds whose pools came out the same (no stage before the tree drew from the
        # seed) select, cut and pack them once.
        self.pools_digest = shared_result("pools_digest", self.pools_key, lambda: content_digest(pools, retrieval))
        return pools, retrieval

    def select(self, pools: list[Pool]) -> list[Selection]:
        """Each question's pool after the tree, the diversifier's choice from it, both stages' report
        columns and the selection metrics."""
        cfg = self.cfg
        services = TreeServices(encoder=self.encoder, tokens=self.reader.token_counter, seed=cfg.seed)
        # Made once per run: threadpool_limits() would rescan the loaded libraries for every question (~4 ms).
        threadpools = ThreadpoolController()
        selections: list[Selection] = []
        desc = f"tree={self.tree.name} diversifier={self.diversifier.name}"
        for pool in tqdm(pools, desc=desc, leave=False, delay=PROGRESS_DELAY):
            pool, tree_info = self.tree.expand(pool, services)
            # One BLAS thread per question: per-query kernels at m ~ 100 are slower with more. (Entered per
            # question, not around the loop, so a tree's encoder keeps its threads.)
            with threadpools.limit(limits=1):
                indices, diversify_info = self.diversifier.select(pool)
            selected = pool.subset(indices)
            columns = {
                **stage_columns("tree", tree_info),
                **stage_columns("diversify", diversify_info),
                **pool_column(pool, selected),
            }
            selections.append(Selection(pool, selected, columns, selection_metrics(selected, pool, int(cfg.k))))
        return selections

    def snippets(self, selections: list[Selection]) -> tuple[list[list[Snippet]], np.ndarray]:
        """The packers' candidate snippets of every question, costed in reader tokens, and their
        embeddings, stacked in one array (embedded in one batch, cached per text)."""
        tokens = self.reader.token_counter
        all_snippets = [
            make_snippets(sel.selected, tokens, **self.cfg.snippets) if self.packer.uses_snippets else []
            for sel in selections
        ]
        flat_texts = [s.text for snippets in all_snippets for s in snippets]
        # With nothing to embed (packer=none) the encoder is not touched, so a cached run never loads it.
        dim = len(selections[0].pool.query_embedding) if selections else 0
        flat_vectors = self.encoder.encode_documents(flat_texts) if flat_texts else np.zeros((0, dim), np.float32)
        return all_snippets, flat_vectors

    def prepare(self, examples) -> list[Prepared]:
        """Every question's packed context and prompt, with the figures of every stage before the reader."""
        cfg, clock = self.cfg, self.clock
        pools, retrieval = self.pools(examples)
        clock.line("retrieve", f"pools of {len(pools)} questions (retriever, reranker, perturbation)", "retrieve")
        warning = k_exceeds_pools(int(cfg.k), pools)
        if warning:
            log.warning(warning)

        def select_and_cut() -> tuple[list[Selection], list[list[Snippet]], np.ndarray, dict[str, float]]:
            start = time.perf_counter()
            selections = self.select(pools)
            middle = time.perf_counter()
            all_snippets, flat_vectors = self.snippets(selections)
            return (
                selections,
                all_snippets,
                flat_vectors,
                {"select": middle - start, "snippets": time.perf_counter() - middle},
            )

        # A packer x budget grid over the same pools selects and cuts snippets once (harness.run.reuse).
        start = time.perf_counter()
        selection_key = None
        if self.flags.force:
            (selections, all_snippets, flat_vectors, seconds), reused = select_and_cut(), False
        else:
            pools_id = self.pools_digest or self.pools_key
            selection_key = keys.selection_key(self.resolved, pools_id, self.tree, self.packer, cfg.seed)
            (selections, all_snippets, flat_vectors, seconds), reused = looked_up(
                "selection", selection_key, select_and_cut
            )
        self.reused["selections"] = int(reused)
        if reused:  # this run spent only the look-up
            seconds = {"select": time.perf_counter() - start, "snippets": 0.0}
        for stage, value in seconds.items():
            clock.add(stage, value)
        clock.line("select", f"tree={self.tree.name} diversifier={self.diversifier.name}", "select")
        if self.packer.uses_snippets:
            # Cutting the chosen documents into the packer's snippets and embedding them is its own stage: on a
            # cold encoder cache it is most of the time before packing, whatever the diversifier.
            count = sum(len(snippets) for snippets in all_snippets)
            clock.line(
                "snippets",
                f"{count} {cfg.snippets.unit} snippets of {len(selections)} questions cut and embedded for "
                f"packer={self.packer.name}" + (", reused from a run with the same pools" if reused else ""),
                "snippets",
            )

        start = time.perf_counter()
        budget, seed = int(cfg.budget), int(cfg.seed)

        def pack_all() -> list[Prepared]:
            return pack_selections(
                self.packer, self.reader, selections, all_snippets, flat_vectors, retrieval, budget, seed
            )

        if selection_key is None:
            prepared, reused = pack_all(), False
        else:
            key = keys.packing_key(self.resolved, selection_key, self.packer, budget, seed)
            prepared, reused = looked_up("packing", key, pack_all)
        clock.since("pack", start)
        self.reused["packings"] = int(reused)
        mean_tokens = sum(p.figures[CONTEXT_TOKENS] for p in prepared) / max(len(prepared), 1)
        note = ", reused from a run with the same pools" if reused else ""
        clock.line(
            "pack", f"packer={self.packer.name} B={cfg.budget}: {mean_tokens:.0f} context tokens on average{note}"
        )
        return prepared

    def read(self, prepared: list[Prepared]) -> list[dict[str, str]]:
        """Each question's response (``answer`` and ``raw``, the whole generation)."""
        start = time.perf_counter()
        # What is sent is a function of the request alone, so a packing reused from an earlier job
        # (harness.run.reuse) is read as this job's reader renders it. The prompt settings are in the packing
        # key, so the rows' prompt (and its token count) is the text this reader renders: checked here.
        requests = [PromptRequest(p.pool.example.question, p.context_text) for p in prepared]
        for item, request in zip(prepared, requests, strict=True):
            if self.reader.render(request) != item.prompt:
                raise RuntimeError(
                    f"question {item.pool.example.question_id!r}: the reader renders another prompt than the "
                    "packing it reuses (a prompt setting missing from harness.read.prompt's packing key?)"
                )
        responses = self.reader.responses(requests)
        self.clock.since("read", start)
        return responses
