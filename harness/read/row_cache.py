"""The row decoder's key cache: every layer's keys and values for a fixed set of rows, right-aligned in shared
buffers (``RowCache``), and one packed prompt's span of a packed prefill's cache (``SegmentCache``)."""

from __future__ import annotations

import torch


class RowCache:
    """The keys and values of every layer for a fixed set of rows, left-padded to one length.

    Kept in buffers with room to grow, so a decoding step writes one position per layer instead of
    copying the whole cache (``torch.cat`` per step took a tenth of the decoding time). Layer ``i``'s
    live positions are ``begins[i]:ends[i]`` of its buffers; every layer holds the same number."""

    def __init__(self, layers: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * layers
        self.values: list[torch.Tensor | None] = [None] * layers
        self.begins = [0] * layers
        self.ends = [0] * layers
        # Set for a run of steps on fixed buffers (``static`` and ``graph`` steps): every layer writes its step's
        # keys at this position, a one-element tensor on the device that the step itself advances, and ``update``
        # returns the whole buffers (the attention reads each row's span from device tensors).
        self.write_at: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return self.ends[0] - self.begins[0]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.ends[layer_idx] - self.begins[layer_idx]

    def live(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.keys[layer], self.values[layer]
        assert keys is not None and values is not None
        span = slice(self.begins[layer], self.ends[layer])
        return keys[:, :, span], values[:, :, span]

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        """Append this step's keys and values of one layer; returns the layer's live keys and values."""
        if self.write_at is not None:
            keys, values = self.keys[layer_idx], self.values[layer_idx]
            assert keys is not None and values is not None
            keys.index_copy_(2, self.write_at, key_states)
            values.index_copy_(2, self.write_at, value_states)
            return keys, values
        count = key_states.shape[2]
        keys = self.keys[layer_idx]
        if keys is None or self.ends[layer_idx] + count > keys.shape[2]:
            self._move(layer_idx, like=key_states, front=0, room=count)
        end = self.ends[layer_idx]
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        assert keys is not None and values is not None
        keys[:, :, end : end + count] = key_states
        values[:, :, end : end + count] = value_states
        self.ends[layer_idx] = end + count
        return self.live(layer_idx)

    def _move(self, layer: int, like: torch.Tensor, front: int, room: int) -> None:
        """``front`` empty positions, the live ones, then room for twice as many: in ``layer``'s own buffers when
        that fills at most half of them (a captured step keeps replaying on them), else in new ones."""
        old = None if self.keys[layer] is None else self.live(layer)
        live = 0 if old is None else old[0].shape[2]
        keys = self.keys[layer]
        if old is not None and keys is not None and 2 * (front + live + room) <= keys.shape[2]:
            for store, part in ((self.keys, 0), (self.values, 1)):
                buffer, moved = store[layer], old[part].clone()  # the spans may overlap
                assert buffer is not None
                buffer.zero_()
                buffer[:, :, front : front + live] = moved
            self.begins[layer], self.ends[layer] = front, front + live
            return
        size = front + max(2 * (live + room), 64)
        for store, part in ((self.keys, 0), (self.values, 1)):
            new = like.new_zeros((like.shape[0], like.shape[1], size, like.shape[3]))
            if old is not None:
                new[:, :, front : front + live] = old[part]
            store[layer] = new
        self.begins[layer], self.ends[layer] = front, front + live

    def reserve(self, count: int) -> None:
        """Room for ``count`` more positions in every layer's buffers, so that a run of steps writes in place."""
        for layer, keys in enumerate(self.keys):
            assert keys is not None
            if self.ends[layer] + count > keys.shape[2]:
                self._move(layer, like=keys, front=0, room=count)

    def advance(self, count: int) -> None:
        """The host's count after a run of ``count`` steps written at ``write_at``."""
        self.ends = [end + count for end in self.ends]

    def drop_front(self, count: int) -> None:
        """Forget the first ``count`` positions: no row attends to them any more."""
        self.begins = [begin + count for begin in self.begins]

    def place(self, row: int, prompt: RowCache | SegmentCache) -> int:
        """Copy a prefilled prompt's keys into ``row``, right-aligned; returns its first live position."""
        length = prompt.length
        if length > self.length:
            self._pad_front(length - self.length)
        start = self.length - length
        for layer in range(len(self.keys)):
            for mine, theirs in zip(self.live(layer), prompt.live(layer), strict=True):
                mine[row].zero_()
                mine[row, :, start:] = theirs[0]
        return start

    def _pad_front(self, count: int) -> None:
        """``count`` empty positions before every row's keys, for a prompt longer than the live length."""
        for layer in range(len(self.keys)):
            if self.begins[layer] >= count:
                self.begins[layer] -= count
                for tensor in self.live(layer):
                    tensor[:, :, :count].zero_()
            else:
                keys = self.keys[layer]
                assert keys is not None
                self._move(layer, like=keys, front=count, room=count)
                self.begins[layer] -= count


class SegmentCache:
    """One packed prompt's keys and values inside a packed prefill's cache, as ``RowCache.place`` reads them."""

    def __init__(self, cache: RowCache, start: int, end: int) -> None:
        self.keys, self.values = cache.keys, cache.values
        self._cache, self._span = cache, slice(start, end)
        self.length = end - start

    def live(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self._cache.live(layer)
        return keys[:, :, self._span], values[:, :, self._span]


def empty_like(prompt: RowCache | SegmentCache, width: int) -> RowCache:
    """A shared cache of ``width`` rows, no positions yet, shaped and typed like a prefilled prompt's."""
    shared = RowCache(len(prompt.keys))
    for mine, theirs in ((shared.keys, prompt.keys), (shared.values, prompt.values)):
        for i, source in enumerate(theirs):
            assert source is not None
            mine[i] = source.new_zeros((width, source.shape[1], 0, source.shape[3]))
    return shared
