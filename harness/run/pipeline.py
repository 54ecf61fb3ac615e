"""One evaluation run: load -> retrieve -> perturb -> tree -> diversify -> pack -> diagnose -> read -> score.

Every stage before ``read`` is reader-independent except token counting, and each is a pure function of
its config slice, so caches (embeddings, reader responses) make sweeps recompute only what changed.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from threadpoolctl import ThreadpoolController
from tqdm.auto import tqdm

from harness import cache
from harness.cache import stable_hash
from harness.cache.fingerprint import code_fingerprint, identity_config, input_files_digest
from harness.cache.pools import POOL_CONFIG_KEYS, PoolCache, pool_key
from harness.cache.postgres import redacted
from harness.core.stage import stage_columns
from harness.core.types import Context, Pool, Snippet
from harness.data.aliases import LOWER_BOUND
from harness.metrics import context_diagnostics, exact_match, f1_score, wordnet_corpus
from harness.metrics.answers import DEFAULT_ANSWER_SCORER, answer_precision_recall, check_answer_scorer
from harness.metrics.diversity import selection_metrics
from harness.metrics.longform import check_scorers, dataset_scores
from harness.metrics.provenance import context_columns, pool_column
from harness.metrics.registry import CONTEXT_TOKENS, EM, F1, PROMPT_TOKENS
from harness.metrics.support import evidence_diagnostics, joint_scores
from harness.pack.base import PackingRequest
from harness.pack.snippets import make_snippets, render_context
from harness.read.prompt import GENERATION_ONLY_KEYS
from harness.run.pools import compute_pools
from harness.run.reuse import content_digest, shared_instance, shared_result
from harness.tree.base import TreeServices
from harness.tree.none import NoTree

log = logging.getLogger(__name__)

PROGRESS_DELAY = 2.0  # seconds before a stage shows a progress bar: short stages print only their line


class Selection(NamedTuple):
    """One question after the tree and the diversifier."""

    pool: Pool  # the pool the diversifier chose from (tree nodes included)
    selected: Pool
    columns: dict[str, Any]  # tree.* and diversify.* report columns
    metrics: dict[str, float]  # selection metrics (harness.metrics.diversity.selection_metrics)


@dataclass
class Prepared:
    """One question after packing: everything the reader needs and every reader-independent figure."""

    pool: Pool
    selected: Pool
    context: Context
    context_text: str
    prompt: str
    figures: dict[str, Any]


def flatten_config(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    """Dotted config keys -> scalar values (lists as JSON), for one-row-per-question tables; ``cfg`` a config or
    its resolved container."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        elif isinstance(node, list):
            flat[prefix[:-1]] = json.dumps(node)
        else:
            flat[prefix[:-1]] = node

    walk(OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg, "")
    return flat


def fit_to_budget(
    context: Context, tokens, budget: int | None, text: str | None = None, count: int | None = None
) -> tuple[Context, str, int, int]:
    """Render the context and count it in reader tokens; drop trailing snippets in the (rare) case the
    rendered text exceeds the budget because tokenization changed across a snippet boundary (a
    SentencePiece word loses its leading-space token after a newline). ``text`` and ``count``, when
    given, are the rendering and count of the whole context (counted in a batch by the caller). Returns
    the context, its text, its token count and how many snippets were dropped (the row's ``trimmed_snippets``)."""
    snippets = list(context.snippets)
    packed = len(snippets)
    if text is None or count is None:
        text = render_context(snippets)
        count = tokens.count(text) if text else 0
    elif not text:
        count = 0
    while budget is not None and count > budget and snippets:
        snippets.pop()
        text = render_context(snippets)
        count = tokens.count(text) if text else 0
    context.snippets = snippets
    context.tokens = count
    return context, text, count, packed - len(snippets)


# Dataset config keys that say how answers are scored: the pipeline applies them, not the loader.
SCORING_KEYS = ("scorers", "answer_scorer")


def dataset_loader_config(dataset: DictConfig) -> dict[str, Any]:
    """The dataset config as its loader's arguments, less the scoring keys: ``scorers`` names the dataset's
    own answer metrics (``harness.metrics.longform.DATASET_SCORERS``), ``answer_scorer`` the official
    script whose EM/F1 rule applies (``harness.metrics.answers.ANSWER_SCORERS``)."""
    return {key: value for key, value in dataset.items() if key not in SCORING_KEYS}


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
        self.scorers = check_scorers(cfg.dataset.get("scorers"))  # before any model loads
        self.answer_scorer = check_answer_scorer(str(cfg.dataset.get("answer_scorer") or DEFAULT_ANSWER_SCORER))
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
        self.timings: dict[str, float] = {}
        # 1 where this run's selections / packings were another run's in this process (harness.run.reuse).
        self.reused = {"selections": 0, "packings": 0}
        self.raw_answers: dict[str, str] = {}

    def counters(self) -> dict[str, int | None]:
        """Texts embedded and prompts read by this run (the shared objects' counters since it began)."""
        now = {
            "encoder_texts_requested": self.encoder.requests,
            "encoder_texts_computed": self.encoder.calls,
            "reader_prompts_requested": getattr(self.reader, "requested", None),
            "reader_prompts_generated": getattr(self.reader, "generated", None),
        }
        start = getattr(self, "_counter_start", None)
        if start is None:
            return now
        return {k: None if v is None else v - (start[k] or 0) for k, v in now.items()}

    def _timed(self, stage: str, start: float) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - start

    def stage_line(self, stage: str, detail: str, *timed: str) -> None:
        """The one line a stage prints: what it did and the seconds it took (its ``timings`` entries)."""
        seconds = sum(self.timings.get(name, 0.0) for name in timed or (stage,))
        log.info("%-8s %s (%.1f s)", stage, detail, seconds)

    def load(self):
        start = time.perf_counter()
        loader = dataset_loader_config(self.cfg.dataset)

        def load_examples():
            examples = instantiate(loader)
            if not examples:
                raise ValueError(f"dataset {self.cfg.dataset.get('name')!r} produced no examples")
            return examples

        # Loaded once per process for the same loader config and file bytes (every job of a sweep reads it).
        self.examples_key = stable_hash(
            dataset_loader_config(self.resolved["dataset"]), input_files_digest(self.resolved["dataset"])
        )
        examples = self.loaded = shared_result("examples", self.examples_key, load_examples)
        self._timed("load", start)
        return examples

    def pools(self, examples) -> tuple[list[Pool], list[dict]]:
        """Retrieved (reranked, perturbed) pools and their clean retrieval metrics.

        Cached on disk (data only, no pickle) under a key of the examples' content, the retriever,
        reranker, perturbation, k and seed config and the pool stage's code fingerprint (``harness.cache.pools``), so a
        budget, packer, diversifier or reader sweep retrieves each pool once.
        """
        cfg = self.cfg
        store = PoolCache(cfg.paths.cache_dir)
        # Hashing every example's content is the costly part of the key: once per loaded question set.
        if examples is getattr(self, "loaded", None):
            config = identity_config(cfg, POOL_CONFIG_KEYS)
            key = shared_result("pool_keys", stable_hash(self.examples_key, config), lambda: pool_key(cfg, examples))
        else:
            key = pool_key(cfg, examples)
        force = bool(cfg.get("cache", {}).get("force", False))

        def load_or_compute() -> tuple[list[Pool], list[dict]]:
            if not force:
                cached = store.load(key)
                if cached is not None:
                    log.info("pools: reusing %s", store.where(key))
                    return cached
            pools, retrieval = compute_pools(
                examples, self.retriever, self.reranker, self.perturbation, self.encoder, cfg.k, cfg.seed, self._timed
            )
            store.save(key, pools, retrieval)
            return pools, retrieval

        # The same pools are read once per process (the key names the cache folder too: the memo is
        # process-wide); cache.force recomputes them.
        self.pools_key = stable_hash(key, store.where(key))
        if force:
            pools, retrieval = load_or_compute()
            self.pools_digest = None
            return pools, retrieval
        pools, retrieval = shared_result("pools", self.pools_key, load_or_compute)
        # The pools' content: seeds whose pools came out the same (no stage before the tree drew from the
        # seed) select, cut and pack them once.
        self.pools_digest = shared_result("pools_digest", self.pools_key, lambda: content_digest(pools, retrieval))
        return pools, retrieval

    def select(self, pools: list[Pool]) -> list[Selection]:
        """Each question's pool after the tree, the diversifier's choice from it, both stages' report
        columns and the selection metrics."""
        cfg = self.cfg
        services = TreeServices(
            encoder=self.encoder, language_model=self.reader, tokens=self.reader.token_counter, seed=cfg.seed
        )
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

    def selection_key(self) -> str:
        """Everything ``select`` and ``snippets`` depend on besides the code of this process: the pools'
        content, the tree, diversifier, k, snippet settings, the reader (its tokenizer costs snippets; trees
        use it as their LM), the encoder and, for a tree that draws random numbers, the seed."""
        resolved = self.resolved
        seed = int(self.cfg.seed) if self.tree.seeded else None
        return stable_hash(
            self.pools_digest or self.pools_key,
            *(resolved.get(group) for group in ("tree", "diversifier", "snippets")),
            # Without a tree the reader only costs snippets; a tree may call it as its LM.
            self.prompt_settings() if isinstance(self.tree, NoTree) else resolved["reader"],
            resolved["retriever"]["encoder"],
            resolved["k"],
            bool(self.packer.uses_snippets),
            seed,
        )

    def prompt_settings(self) -> dict[str, Any]:
        """The reader's settings bar the generation-only ones: what renders and counts its prompts."""
        return {k: v for k, v in (self.resolved["reader"] or {}).items() if k not in GENERATION_ONLY_KEYS}

    def prepare(self, examples) -> list[Prepared]:
        cfg = self.cfg
        pools, retrieval = self.pools(examples)
        self.stage_line("retrieve", f"pools of {len(pools)} questions (retriever, reranker, perturbation)", "retrieve")
        warning = k_exceeds_pools(int(cfg.k), pools)
        if warning:
            log.warning(warning)
        force = bool(cfg.get("cache", {}).get("force", False))

        computed: list[bool] = []

        def select_and_cut() -> tuple[list[Selection], list[list[Snippet]], np.ndarray, dict[str, float]]:
            computed.append(True)
            seconds: dict[str, float] = {}
            start = time.perf_counter()
            selections = self.select(pools)
            seconds["select"] = time.perf_counter() - start
            start = time.perf_counter()
            all_snippets, flat_vectors = self.snippets(selections)
            seconds["snippets"] = time.perf_counter() - start
            return selections, all_snippets, flat_vectors, seconds

        # A packer x budget grid over the same pools selects and cuts snippets once (harness.run.reuse).
        start = time.perf_counter()
        selection_key = None if force else self.selection_key()
        selections, all_snippets, flat_vectors, seconds = (
            select_and_cut() if selection_key is None else shared_result("selection", selection_key, select_and_cut)
        )
        self.reused["selections"] = int(not computed)
        if not computed:  # reused: this run spent only the look-up
            seconds = {"select": time.perf_counter() - start, "snippets": 0.0}
        for stage, value in seconds.items():
            self.timings[stage] = self.timings.get(stage, 0.0) + value
        self.stage_line("select", f"tree={self.tree.name} diversifier={self.diversifier.name}", "select", "snippets")

        start = time.perf_counter()
        packed: list[bool] = []

        def pack_all() -> list[Prepared]:
            packed.append(True)
            return self.pack(selections, all_snippets, flat_vectors, retrieval)

        key = None if selection_key is None else self.packing_key(selection_key)
        prepared = pack_all() if key is None else shared_result("packing", key, pack_all)
        self._timed("pack", start)
        self.reused["packings"] = int(not packed)
        mean_tokens = sum(p.figures[CONTEXT_TOKENS] for p in prepared) / max(len(prepared), 1)
        reused = "" if packed else ", reused from a run with the same pools"
        self.stage_line(
            "pack", f"packer={self.packer.name} B={cfg.budget}: {mean_tokens:.0f} context tokens on average{reused}"
        )
        return prepared

    def packing_key(self, selection_key: str) -> str:
        """Everything ``pack`` depends on: the selection, the packer, the budget, the reader's prompt
        settings and, for a packer that draws random numbers, the seed."""
        seed = int(self.cfg.seed) if self.packer.seeded else None
        return stable_hash(selection_key, self.resolved["packer"], self.prompt_settings(), int(self.cfg.budget), seed)

    def pack(
        self,
        selections: list[Selection],
        all_snippets: list[list[Snippet]],
        flat_vectors: np.ndarray,
        retrieval: list[dict],
    ) -> list[Prepared]:
        """Every question's packed context, its prompt and the reader-independent figures."""
        cfg = self.cfg
        tokens = self.reader.token_counter
        threadpools = ThreadpoolController()
        prepared: list[Prepared] = []
        offset = 0
        budget, seed = int(cfg.budget), int(cfg.seed)
        contexts: list[Context] = []
        for (pool, selected, _, _), snippets in zip(
            selections,
            tqdm(all_snippets, desc=f"pack={self.packer.name} B={budget}", leave=False, delay=PROGRESS_DELAY),
            strict=True,
        ):
            vectors = flat_vectors[offset : offset + len(snippets)]
            offset += len(snippets)
            request = PackingRequest(
                question=pool.example.question,
                pool=selected,
                snippets=snippets,
                snippet_embeddings=vectors,
                query_embedding=pool.query_embedding,
                budget=budget,
                tokens=tokens,
                seed=seed,
            )
            with threadpools.limit(limits=1):
                contexts.append(self.packer.pack(request))

        # Contexts and prompts are counted in one tokenizer call each, not one per question.
        texts = [render_context(context.snippets) for context in contexts]
        counts = tokens.count_many(texts)
        fitted = [
            fit_to_budget(context, tokens, None if context.budget is None else budget, text, count)
            for context, text, count in zip(contexts, texts, counts, strict=True)
        ]
        prompts = [
            self.reader.render_prompt(pool.example.question, text)
            for (pool, _, _, _), (_, text, _, _) in zip(selections, fitted, strict=True)
        ]
        prompt_counts = self.reader.count_prompt_tokens_many(prompts)
        for (pool, selected, stage_info, metrics), snippets, retr, (context, text, count, trimmed), prompt, n in zip(
            selections, all_snippets, retrieval, fitted, prompts, prompt_counts, strict=True
        ):
            figures = {
                **retr,
                **metrics,
                **context_diagnostics(context, pool.example, text),
                **evidence_diagnostics(context, pool.example),
                **stage_info,
                **stage_columns("pack", context.extra),
                "trimmed_snippets": trimmed,
                "n_candidates": len(pool.candidates),
                "n_selected": len(selected.candidates),
                "n_snippets_available": len(snippets),
                "n_snippets": len(context.snippets),
                CONTEXT_TOKENS: count,
                PROMPT_TOKENS: n,
            }
            figures.update(context_columns(context, text, pool))
            prepared.append(Prepared(pool, selected, context, text, prompt, figures))
        return prepared

    def read(self, prepared: list[Prepared]) -> list[str]:
        start = time.perf_counter()
        # Rendered again by this run's reader: a packing reused from an earlier job (harness.run.reuse) was rendered
        # by that job's reader, and a chat-endpoint server reader sends the messages it rendered itself, system
        # message included. The prompt settings are in the packing key, so the text is the same.
        prompts = [self.reader.render_prompt(p.pool.example.question, p.context_text) for p in prepared]
        for item, prompt in zip(prepared, prompts, strict=True):
            if prompt != item.prompt:
                raise RuntimeError(
                    f"question {item.pool.example.question_id!r}: the reader renders another prompt than the "
                    "packing it reuses (a prompt setting missing from harness.read.prompt's packing key?)"
                )
        if hasattr(self.reader, "responses"):
            responses = self.reader.responses(prompts)
        else:
            responses = [{"answer": a, "raw": a} for a in self.reader.answer(prompts)]
        # The whole generation goes into the row next to the extracted answer (only this chunk's prompts).
        self.raw_answers = {prompt: r["raw"] for prompt, r in zip(prompts, responses, strict=False)}
        self._timed("read", start)
        return [r["answer"] for r in responses]

    def row(self, item: Prepared, answer: str | None, choices: dict[str, str], config_columns: dict[str, Any]) -> dict:
        """One question's row: the question, the run's components, the answer and its scores, the
        figures of ``prepare`` (among them each stage's own report as ``tree.*``, ``diversify.*`` and
        ``pack.*`` columns), the context and the flattened config."""
        return {
            **self.question_columns(item.pool.example),
            **self.run_columns(choices),
            **self.answer_columns(item, answer),
            **item.figures,
            "context": item.context_text,
            **config_columns,
        }

    def question_columns(self, ex) -> dict[str, Any]:
        return {
            "question_id": ex.question_id,
            "dataset": ex.dataset or self.cfg.dataset.get("name", ""),
            "split": ex.split,
            "question": ex.question,
            "gold_answers": json.dumps(list(ex.answers)),
            "hops": ex.hops,
            "qtype": ex.qtype,
        }

    def run_columns(self, choices: dict[str, str]) -> dict[str, Any]:
        cfg = self.cfg
        return {
            "retriever": choices.get("retriever", ""),
            "reranker": choices.get("reranker", "none"),
            "perturb": choices.get("perturb", "none"),
            "tree": self.tree.name,
            "diversifier": self.diversifier.name,
            "packer": self.packer.name,
            "budget": int(cfg.budget),
            "k": int(cfg.k),
            "seed": int(cfg.seed),
            "reader": self.reader.name,
        }

    def answer_columns(self, item: Prepared, answer: str | None) -> dict[str, Any]:
        """The answer, the whole generation and their scores under the dataset's official rule
        (``answer_scorer``), the joint answer x supporting-fact scores where the row has sp figures and,
        for 2Wiki, whether the gold answers lack the official aliases (scores a lower bound)."""
        ex = item.pool.example
        rule = self.answer_scorer
        columns: dict[str, Any] = {
            "answer": answer,
            "raw_answer": None if answer is None else self.raw_answers.get(item.prompt, answer),
            "answer_scorer": rule,
        }
        if LOWER_BOUND in ex.metadata:
            columns[LOWER_BOUND] = bool(ex.metadata[LOWER_BOUND])
        if answer is None:
            return {**columns, EM: float("nan"), F1: float("nan")}
        em = exact_match(answer, ex.answers)
        precision, recall = answer_precision_recall(answer, ex.answers, rule)
        return {
            **columns,
            EM: em,
            F1: f1_score(answer, ex.answers, rule),
            **joint_scores(em, precision, recall, item.figures),
            **dataset_scores(answer, ex, self.scorers),
        }


def run_key(cfg: DictConfig) -> str:
    """Identity of a run's results: the resolved config without runtime-only keys (logger, paths, cache,
    read chunking, progress), the bytes of the dataset files it names and the fingerprint of all stage
    code (``harness.cache.fingerprint``)."""
    return stable_hash("run", identity_config(cfg), input_files_digest(cfg.get("dataset")), code_fingerprint("run"))


def finished_summary(output_dir: Path, key: str) -> dict | None:
    path = output_dir / "summary.json"
    if not path.exists():
        return None
    from harness.runlog.outputs import read_summary

    summary = read_summary(path)
    if summary is None:
        return None
    return summary if summary.get("run_key") == key and (output_dir / "rows.parquet").exists() else None


def run(cfg: DictConfig, output_dir: str | Path, choices: dict[str, str] | None = None) -> pd.DataFrame:
    """Run one configuration end to end and write rows, summary and config into ``output_dir``.

    Rows are journaled as each reading chunk finishes; a killed run started again in the same directory
    reads only what is missing. A finished run is not recomputed unless ``cache.force=true``.
    """
    from harness.run.config_check import validate
    from harness.runlog.journal import RowJournal, normalise_row
    from harness.runlog.outputs import clean_temporaries, ensure_writable, print_summary_payload, write_outputs

    validate(cfg)  # before any model loads
    cache_cfg = cfg.get("cache", {})
    cache.configure(cache_cfg.get("url"), cfg.paths.cache_dir, str(cache_cfg.get("network_fs", "fallback")))
    output_dir = Path(output_dir)
    ensure_writable(output_dir)
    clean_temporaries(output_dir)
    choices = choices or {}
    key = run_key(cfg)
    force = bool(cfg.get("cache", {}).get("force", False))
    finished = None if force else finished_summary(output_dir, key)
    if finished is not None:
        log.info("run in %s already finished with this config; skipping (cache.force=true recomputes)", output_dir)
        print_summary_payload(finished)
        return pd.read_parquet(output_dir / "rows.parquet")

    pipeline = Pipeline(cfg)
    examples = pipeline.load()
    pipeline.stage_line("load", f"{len(examples)} questions from {cfg.dataset.get('name')}")
    prepared = pipeline.prepare(examples)

    journal = RowJournal(output_dir, key)
    if force:
        journal.path.unlink(missing_ok=True)
    done = journal.load()
    if done:
        log.info("resuming: %d of %d questions already have rows", len(done), len(prepared))
    todo = [p for p in prepared if p.pool.example.question_id not in done]
    config_columns = {f"cfg.{k}": v for k, v in flatten_config(pipeline.resolved).items()}
    if config_columns.get("cfg.cache.url"):  # rows travel (W&B, shared folders): never with a password
        config_columns["cfg.cache.url"] = redacted(config_columns["cfg.cache.url"])
    chunk = max(1, int(cfg.get("read_chunk", 64)))
    reading = bool(cfg.get("read", True))
    for start in tqdm(range(0, len(todo), chunk), desc="read", disable=len(todo) <= chunk, delay=PROGRESS_DELAY):
        items = todo[start : start + chunk]
        # read=false: retrieval/selection studies that need no answers (EM and F1 are left empty).
        answers = pipeline.read(items) if reading else [None] * len(items)
        fresh = [
            normalise_row(pipeline.row(item, answer, choices, config_columns))
            for item, answer in zip(items, answers, strict=False)
        ]
        journal.append(fresh)
        done.update((r["question_id"], r) for r in fresh)
    if reading:
        generated = pipeline.counters()["reader_prompts_generated"]
        fresh_note = "" if generated is None else f", {generated} generated (the rest cached)"
        pipeline.stage_line("read", f"{len(todo)} prompts by {pipeline.reader.name}{fresh_note}")
    rows = pd.DataFrame.from_records([done[p.pool.example.question_id] for p in prepared])
    write_outputs(
        cfg,
        rows,
        output_dir,
        pipeline.timings,
        key,
        counters={**pipeline.counters(), **{f"{kind}_reused": n for kind, n in pipeline.reused.items()}},
    )
    return rows
