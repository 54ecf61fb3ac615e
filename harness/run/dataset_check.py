"""The dataset a run names, loaded in the config check: before torch, transformers or faiss are imported.

A malformed file, a file of another benchmark (a HotpotQA file given to ``dataset=musique_ircot``) or a
loader option out of range (``dataset.source``, ``dataset.layout``, ``dataset.setting``) is then reported
like any invalid config value, one line each, instead of after the heavy imports. The examples loaded here
are the ones the pipeline uses (:func:`load_examples`, kept per process under a key of the loader config
and the files' bytes), so a valid dataset is read once. A long-document dataset is checked with texts
chunked by whitespace words: every record is read and checked without loading the tokenizer, which the
pipeline's own load then does.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.cache import stable_hash
from harness.cache.fingerprint import input_files_digest
from harness.run.reuse import shared_result

# Dataset config keys that say how answers are scored: the pipeline applies them, not the loader.
SCORING_KEYS = ("scorers", "answer_scorer")
# Loaders the check runs: the package's own, which import nothing heavy; another may load anything.
CHECKED_TARGETS = "harness.data."


def dataset_loader_config(dataset: Any) -> dict[str, Any]:
    """The dataset config as its loader's arguments, less the scoring keys: ``scorers`` names the dataset's
    own answer metrics (``harness.metrics.longform.DATASET_SCORERS``), ``answer_scorer`` the official
    script whose EM/F1 rule applies (``harness.metrics.answers.ANSWER_SCORERS``)."""
    return {key: value for key, value in dataset.items() if key not in SCORING_KEYS}


def cache_folder(cfg: DictConfig) -> str | None:
    """``paths.cache_dir``, where file digests are remembered between runs; None when it does not resolve."""
    folder = OmegaConf.select(cfg, "paths.cache_dir", default=None, throw_on_resolution_failure=False)
    return None if folder is None else str(folder)


def load_examples(dataset: DictConfig, folder: str | None = None) -> tuple[list[Any], str]:
    """The examples of a dataset config and their key: loaded once per process for the same loader config
    and file bytes (the check, then the pipeline, and every job of a sweep, read them once). ``folder``: where
    the files' digests are remembered (``paths.cache_dir``)."""
    resolved = OmegaConf.to_container(dataset, resolve=True)
    assert isinstance(resolved, dict)
    key = stable_hash(dataset_loader_config(resolved), input_files_digest(resolved, folder))
    return shared_result("examples", key, lambda: _instantiate(dataset)), key


def _instantiate(dataset: DictConfig, **overrides: Any) -> list[Any]:
    examples = instantiate(dataset_loader_config(dataset), **overrides)
    if not examples:
        raise ValueError(f"dataset {dataset.get('name')!r} produced no examples")
    return examples


def dataset_problems(cfg: DictConfig, conf_dir: Path) -> list[str]:
    """The dataset of ``cfg`` loaded (or, for a long-document one, read and checked) by its loader: the
    loader's error as one line, empty when it loads. ``conf_dir``: the config folder, whose
    ``dataset/`` configs are named when a file fits another one."""
    dataset = cfg.get("dataset")
    if not isinstance(dataset, DictConfig) or not str(dataset.get("_target_", "")).startswith(CHECKED_TARGETS):
        return []
    try:
        if OmegaConf.select(dataset, "tokenizer", default=None) is not None:
            _instantiate(dataset, tokenizer=None)  # whitespace words: no tokenizer load
        else:
            load_examples(dataset, cache_folder(cfg))
    except (InstantiationException, ValueError, TypeError, OSError) as error:
        cause = error.__cause__ if isinstance(error, InstantiationException) else error
        if not isinstance(cause, (ValueError, TypeError, OSError)) or isinstance(cause, OmegaConfBaseException):
            raise
        return [f"dataset={_choice(cfg)}: {cause}{_fitting_configs(cause, conf_dir)}"]
    return []


def _choice(cfg: DictConfig) -> str:
    """The dataset config the run chose (``hotpotqa_ircot``), else the dataset's name."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        choice = HydraConfig.get().runtime.choices.get("dataset")
    else:
        choice = OmegaConf.select(cfg, "hydra.runtime.choices.dataset", default=None)
    return str(choice or OmegaConf.select(cfg, "dataset.name", default="?"))


def _fitting_configs(error: BaseException, conf_dir: Path) -> str:
    """ "; for this file use dataset=NAME" when ``error`` says which layout (and options) the file fits."""
    layout = getattr(error, "layout", None)
    if layout is None:
        return ""
    wanted = getattr(error, "options", {}).items()
    names = [name for name, node in _layout_configs(str(conf_dir)) if node[0] == layout and wanted <= node[1].items()]
    return f"; for this file use dataset={' or dataset='.join(names)}" if names else ""


@lru_cache(maxsize=4)
def _layout_configs(conf_dir: str) -> tuple[tuple[str, tuple[str, dict[str, Any]]], ...]:
    """Each dataset config of ``conf_dir`` that names a layout: its name, the layout and its other keys."""
    found = []
    for path in sorted(Path(conf_dir, "dataset").glob("*.yaml")):
        try:
            node = OmegaConf.to_container(OmegaConf.load(path))
        except (OSError, OmegaConfBaseException):
            continue
        if isinstance(node, dict) and isinstance(node.get("layout"), str):
            found.append((path.stem, (node["layout"], node)))
    return tuple(found)
