"""Errors of the cache stores that are not damage: a file or server that cannot be reached is reported,
never moved aside or recomputed around."""

from __future__ import annotations


class CacheAccessError(OSError):
    """A cache file that cannot be opened or written, or a cache database that cannot be reached."""
