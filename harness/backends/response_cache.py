"""One response cache in front of every generator: the reader, the server reader and the tree's chat LM.

In the manner of lm-evaluation-harness's ``CachingLM``: the cache owns the only response key,
``stable_hash(*identity, code_fingerprint(stage), *parts)`` over the owner's identity, the code fingerprint
of its stage and the request's parts (the order every owner has always hashed, so existing entries stay
valid); the owner supplies a function that generates the requests not found. Each distinct prompt is looked
up once and generated at most once per call; what is generated is committed to the ``TextStore`` (and
the in-memory layer) unless the generator commits as it goes, per batch or per request, so a run killed
part-way keeps every response already paid for.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from harness.cache import TextStore, stable_hash
from harness.cache.fingerprint import code_fingerprint

T = TypeVar("T")
R = TypeVar("R", bound=Hashable)


def _as_is(key: str, entry: Any) -> Any:
    return entry


class ResponseCache(Generic[T]):
    """Responses by key in ``store`` (and, with ``memory``, in this process).

    ``decode(key, entry)`` turns a stored entry into the response callers get; ``None`` means the entry
    does not hold a usable response, which is then generated again. ``identity()`` gives the owner's parts
    of every key (everything besides the request that changes a response); it is called per key, not at
    construction, so an identity that reads files (a vLLM reader's weights digest) stays lazy.
    """

    def __init__(
        self,
        store: TextStore | None,
        decode: Callable[[str, Any], T | None] = _as_is,
        memory: bool = False,
        identity: Callable[[], Sequence[Any]] | None = None,
        stage: str | None = None,
    ) -> None:
        self.store = store
        self.decode = decode
        self.memory: dict[str, T] | None = {} if memory else None
        self.identity = identity
        self.stage = stage

    def key(self, *parts: Any) -> str:
        """The key of the response to a request of ``parts``: the owner's identity, its stage's code
        fingerprint (the code that builds and sends the request is part of the answer's identity), then the parts."""
        if self.identity is None or self.stage is None:
            raise ValueError("this response cache was built without an owner identity and stage: it has no keys")
        return stable_hash(*self.identity(), code_fingerprint(self.stage), *parts)

    def lookup(self, keys: Iterable[str]) -> dict[str, T]:
        """The responses held for ``keys``; keys without one are left out."""
        keys = list(keys)
        found: dict[str, T] = {}
        if self.memory is not None:
            found = {k: self.memory[k] for k in keys if k in self.memory}
        if self.store is not None:
            for key, entry in self.store.get_texts(k for k in keys if k not in found).items():
                response = self.decode(key, entry)
                if response is not None:
                    found[key] = response
        return found

    def put(self, entries: Mapping[str, Any]) -> None:
        """Commit ``entries`` (key -> what the store keeps; the memory layer keeps it decoded)."""
        if not entries:
            return
        if self.memory is not None:
            for key, entry in entries.items():
                response = self.decode(key, entry)
                if response is not None:
                    self.memory[key] = response
        if self.store is not None:
            self.store.put_texts(dict(entries))

    def responses(
        self,
        prompts: Sequence[R],
        key: Callable[[R], str],
        generate: Callable[[list[R], list[str]], Mapping[str, Any]],
        commit: bool = True,
    ) -> tuple[list[T], int]:
        """One response per prompt (any hashable request), aligned with ``prompts``, and how many distinct
        prompts were generated.

        ``generate(missing, keys)`` receives the distinct prompts without a response and their keys and
        returns ``key -> response``. With ``commit=False`` the generator has committed its entries itself
        (through ``put`` or straight into the store)."""
        prompts = list(prompts)
        keys = {p: key(p) for p in dict.fromkeys(prompts)}
        found = self.lookup(keys.values())
        missing = [p for p in keys if keys[p] not in found]
        if missing:
            new = dict(generate(missing, [keys[p] for p in missing]))
            if commit:
                self.put(new)
            elif self.memory is not None:
                self.memory.update(new)
            found.update(new)
        if self.memory is not None:
            self.memory.update({k: found[k] for k in keys.values()})
        return [found[keys[p]] for p in prompts], len(missing)
