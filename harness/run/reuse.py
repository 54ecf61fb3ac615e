"""What the jobs of one process share: stage objects, loaded pools and each pool's selection.

Hydra's basic launcher runs every job of a sweep in one process, one after another. Building a job's stages
anew would load the same tokenizer, encoder and reader again for every packer x budget x seed cell, and read
the same pool file again: about a second of fixed cost per job. A stage object keeps no per-question state
(docs/architecture.md), so an object built from an identical resolved config is handed to the next job as is;
its in-memory look-ups (token counts, embeddings) carry over with it. Results that depend only on the pools
and the stages before the packer (the tree, the diversifier's choice, the snippets with their costs and
embeddings) are kept under a key of everything they depend on, so a packer x budget grid selects and
embeds each pool once. A packing is kept under a key of its inputs' content (``content_digest``): seeds that
draw the same questions into the same pools pack each (packer, budget) once, whatever their config says.

Bounded on purpose: one object per config group (the last config seen), so a reader ladder holds one set of
weights at a time, and a few results of each kind (a sweep's seeds alternate from job to job).
"""

from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from harness.cache import stable_hash
from harness.cache.stores import configured_url

T = TypeVar("T")

RESULTS_PER_KIND = 8

_instances: dict[str, tuple[str, Any]] = {}
_results: dict[str, OrderedDict[str, Any]] = {}


def shared_instance(group: str, node: Any, build: Callable[[], T]) -> T:
    """The object ``build`` makes from ``node``, a resolved config (paths included: another cache folder is
    another object): the one built for the previous job from an equal config, else a new one that replaces it."""
    key = stable_hash(node, configured_url())  # a store opened on another cache backend is another object
    held = _instances.get(group)
    if held is not None and held[0] == key:
        return held[1]
    replaced = _instances.pop(group, None)
    if replaced is not None:
        # Let the old object go before the new one loads: its weights, and an engine it runs in another
        # process (a vLLM worker holds its GPU memory until it exits, so the next engine could not start).
        close = getattr(replaced[1], "close", None)
        if callable(close):
            close()
        del replaced
    made = build()
    _instances[group] = (key, made)
    return made


def shared_result(kind: str, key: str, compute: Callable[[], T]) -> T:
    """``compute()``'s value under ``key`` (a content key: everything the value depends on), computed once
    per process while it stays among the last ``RESULTS_PER_KIND`` of its kind used."""
    return looked_up(kind, key, compute)[0]


def looked_up(kind: str, key: str, compute: Callable[[], T]) -> tuple[T, bool]:
    """``shared_result`` and whether the value was another job's (True) or computed now (False)."""
    held = _results.setdefault(kind, OrderedDict())
    if key in held:
        held.move_to_end(key)
        return held[key], True
    value = compute()
    held[key] = value
    while len(held) > RESULTS_PER_KIND:
        held.popitem(last=False)
    return value, False


def content_digest(*values: Any) -> str | None:
    """A digest of ``values`` by content (their pickle: numpy arrays, dataclasses, dicts), or None when one
    cannot be pickled. Equal digests mean equal bytes, hence equal content; equal content may still give
    another digest (pickle records shared references), which only costs a recomputation."""
    try:
        payload = pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    return hashlib.blake2b(payload, digest_size=32).hexdigest()


def clear() -> None:
    """Forget every shared object (tests; a process that wants a cold start)."""
    _instances.clear()
    _results.clear()
