"""Durable caches shared by runs: embeddings, reader and LM responses, trees, compressions, reranker scores
and pools, keyed by content (never paths), checked on every load, recomputed when damaged.

- ``stores``: the stores the stages use, sealed values over one of two backends;
- ``sqlite``: one SQLite file per store under ``paths.cache_dir`` (the default, one host);
- ``postgres``: one PostgreSQL database for every host (``cache.url=postgresql://...``);
- ``network_fs``: what the SQLite backend does on a network filesystem;
- ``files``: cache files created with the umask's mode (a folder shared by a group), only regular files read;
- ``copy``: ``python -m harness.cache copy SRC DST`` between a cache folder and a database.
"""

from __future__ import annotations

import hashlib
import json

from harness.cache.errors import CacheAccessError
from harness.cache.sqlite import quarantine
from harness.cache.stores import ArrayStore, CheckedStore, TextStore, configure


def stable_hash(*parts: object) -> str:
    """sha256 over the JSON form of ``parts``: the same inputs give the same key on any machine."""
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


__all__ = ["ArrayStore", "CacheAccessError", "CheckedStore", "TextStore", "configure", "quarantine", "stable_hash"]
