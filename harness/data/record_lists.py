"""Lists of JSON objects inside a record (a question's passages, its answers), checked item by item."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from harness.data.records import RecordContext


def each_object(items: list[Any], ctx: RecordContext, field: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each item of the list ``items`` (the record's ``field``) beside its own field name (``field[i]``), for
    the messages about it. An item that is not an object is an error when the loop reaches it, so the items
    before it are read first, as a loop checking each item in turn does."""
    for position, item in enumerate(items):
        item_field = f"{field}[{position}]"
        if not isinstance(item, dict):
            raise ctx.error(f"expected an object, got {type(item).__name__}", item_field)
        yield item_field, item
