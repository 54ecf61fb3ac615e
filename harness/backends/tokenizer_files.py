"""A reader's tokenizer from its files, without its weights and, for the tokenizers the harness ships,
without importing torch.

A run that does not read (``read=false``), or reads through llama.cpp, still renders and counts every
prompt with the reader's Hugging Face tokenizer. ``AutoTokenizer`` finds the tokenizer's class through the
model's config, and importing transformers' config machinery imports torch: 2 to 4 s of every such process
on a 2-core CPU, more than the tokenizer itself takes to load. The folders the harness converts from its
offline models (``harness.backends.offline_models``: the model folder, or the tokenizer alone) hold a class and
model type whose resolution is known (``DIRECT_CLASSES``), so that class is imported by name and loaded;
``tests/test_tokenizer_files.py`` checks it is the object ``AutoTokenizer`` builds, state and renderings. Any
other source (hub ids, other folders, remote code) goes through ``AutoTokenizer``, whose special cases (hub
classes it overrides for some model ids) are not repeated here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.backends.offline_models import OFFLINE_MODELS
from harness.core.model_files import files_signature

# config.json's model_type -> the tokenizer classes (tokenizer_config.json's ``tokenizer_class``) that
# AutoTokenizer resolves to themselves for it. "" is a tokenizer-only folder (no config.json).
DIRECT_CLASSES: dict[str, frozenset[str]] = {
    "qwen2": frozenset({"Qwen2Tokenizer"}),
    "llama": frozenset({"TokenizersBackend", "PreTrainedTokenizerFast"}),
    "": frozenset({"Qwen2Tokenizer", "TokenizersBackend", "PreTrainedTokenizerFast"}),
}
# The names of the folders the offline models are converted into (their tokenizer alone: "-tokenizer").
OFFLINE_FOLDERS = frozenset(
    name for spec in OFFLINE_MODELS.values() for name in (spec.folder_name, f"{spec.folder_name}-tokenizer")
)


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, json.JSONDecodeError):
        return {}


def direct_class_name(folder: str | Path, trust_remote_code: bool = False) -> str | None:
    """The tokenizer class ``folder`` can be loaded with directly, or ``None`` where only AutoTokenizer
    knows (not an offline model's folder, remote code, or a class or model type outside ``DIRECT_CLASSES``)."""
    folder = Path(folder)
    if trust_remote_code or folder.name not in OFFLINE_FOLDERS or not folder.is_dir():
        return None
    settings = _json(folder / "tokenizer_config.json")
    name = settings.get("tokenizer_class")
    if not isinstance(name, str) or "auto_map" in settings:
        return None
    model_type = _json(folder / "config.json").get("model_type", "")
    return name if name in DIRECT_CLASSES.get(model_type, frozenset()) else None


def pretrained_tokenizer(path: str | Path, trust_remote_code: bool = False):
    """The Hugging Face tokenizer of a folder or hub id, as ``AutoTokenizer.from_pretrained`` gives it."""
    name = direct_class_name(path, trust_remote_code)
    if name is not None:
        import transformers

        return getattr(transformers, name).from_pretrained(str(path))
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code)


def ensure_pad_token(tokenizer, source: str | Path):
    """``tokenizer`` with a pad token for batching: its own, else its eos token."""
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"tokenizer of {str(source)!r} has neither a pad nor an eos token to pad with")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


_TOKENIZERS: dict[tuple, Any] = {}


def memoized_tokenizer(source: str | Path, load: Callable[[], Any], *options: Any):
    """One tokenizer per source and options in a process. Sweep jobs in one process (the basic launcher)
    each build their readers afresh, and Qwen2.5's tokenizer (151k-token vocabulary) takes seconds to parse.
    Keyed by the source's files and their modification times, so a folder rewritten since is read again.
    Every loader sets the same padding side and pad token, so the readers sharing one see the same; callers
    treat it as read-only (deep-copy it to change a setting)."""
    key = (str(source), files_signature(source), *options)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = load()
    return _TOKENIZERS[key]
