"""Parameter counts kept on disk between processes, so a plan after the first needs neither torch nor
transformers (their import is most of a cold plan's seconds).

An entry is keyed by the config file's bytes, the installed transformers version (its modules decide which
parameters exist and which a quantizer skips) and the counting code itself (``params.py``), so any of the
three changing computes the counts again. A damaged entry is recomputed and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, replace
from functools import cache
from importlib import metadata
from pathlib import Path

from harness.plan import params
from harness.plan.params import Block, ModelFacts, Param

SUBDIR = "plan"


@cache
def _code_digest() -> str:
    version = metadata.version("transformers")
    return hashlib.sha256(Path(params.__file__).read_bytes() + version.encode()).hexdigest()


def entry_path(cache_dir: str | Path, config_path: Path) -> Path:
    digest = hashlib.sha256(config_path.read_bytes() + _code_digest().encode()).hexdigest()
    return Path(cache_dir) / SUBDIR / f"{digest[:32]}.json"


def _decode(data: dict, config_path: Path) -> ModelFacts:
    blocks = tuple(
        Block(
            b["name"],
            tuple(Param(**{**p, "linear": tuple(p["linear"]) if p["linear"] else None}) for p in b["params"]),
            b["is_layer"],
        )
        for b in data.pop("blocks")
    )
    return ModelFacts(**{**data, "blocks": blocks, "config_path": str(config_path)})


def _write(path: Path, facts: ModelFacts) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as stream:
            json.dump(asdict(facts), stream)
        os.chmod(staging, 0o644)  # mkstemp makes it private; the cache is shared like the rest of cache_dir
        os.replace(staging, path)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)


def usable_cache_dir(value: object) -> Path | None:
    """A reader config's ``cache_dir`` when it is a real path (an unresolved ``${...}`` is not)."""
    if not value or "${" in str(value):
        return None
    return Path(str(value))


def cached_model_facts(config_path: str | Path, cache_dir: str | Path | None) -> ModelFacts:
    """``params.model_facts``, read from ``<cache_dir>/plan/`` when counted before, else counted and stored."""
    path = Path(config_path).resolve()
    if cache_dir is None:
        return params.model_facts(path)
    entry = entry_path(cache_dir, path)
    if entry.is_file():
        try:
            return _decode(json.loads(entry.read_text()), path)
        except (ValueError, TypeError, KeyError):
            pass  # a half-written or older entry: count again
    facts = params.model_facts(path)
    try:
        _write(entry, replace(facts, config_path=str(path)))
    except OSError:
        pass  # a read-only cache still gets its plan
    return facts
