"""The dataset registry: which official files each dataset config reads, where they come from, and their hashes.

The registry is data (``harness/data/registry.yaml``), not code; a user's own file in the same format
(``--registry FILE``) adds datasets or replaces entries of the same name. Each dataset names one or more files;
each file names the path it takes under ``paths.data_dir``, its sources in the order they are tried (the official
URL first, then copies), the sha256 and size of what is downloaded, and, when that is an archive, the archive's
own path and the member to take out of it. A file with ``sha256: null`` has no published checksum: its first
fetch records the hash beside the file and says so (trust on first use).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

BUILTIN_REGISTRY = Path(__file__).resolve().parents[1] / "registry.yaml"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_DATASET_KEYS = {"description", "configs", "license", "citation", "homepage", "files", "note"}
_FILE_KEYS = {"path", "sources", "sha256", "size", "checksum_from", "archive", "member"}


class RegistryError(ValueError):
    """A registry file that cannot be used; the message names the file, the dataset and the field."""


@dataclass(frozen=True)
class DataFile:
    """One file a dataset config reads, as it lands under the data folder."""

    path: str  # relative to paths.data_dir, as the dataset configs name it
    sources: tuple[str, ...]  # URLs tried in order: the official one first
    sha256: str | None  # of what is downloaded (the archive when there is one); None: trust on first use
    size: int | None  # bytes downloaded
    checksum_from: str | None  # where the published checksum was read
    archive: str | None = None  # the archive's path under the data folder, when the file is a member of one
    member: str | None = None  # the member's name inside the archive

    @property
    def download_path(self) -> str:
        """What the sources deliver: the archive when there is one, else the file itself."""
        return self.archive or self.path


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    configs: tuple[str, ...]  # the dataset configs (conf/dataset/NAME.yaml) that read these files
    license: str
    citation: str
    homepage: str
    files: tuple[DataFile, ...]
    note: str = ""
    registry: str = ""  # the registry file it came from

    @property
    def size(self) -> int | None:
        """Bytes to download (each archive counted once); None when a size is unknown."""
        sizes = {file.download_path: file.size for file in self.files}
        return None if None in sizes.values() else sum(s for s in sizes.values() if s is not None)


def _error(where: Path, name: str, message: str) -> RegistryError:
    return RegistryError(f"{where}: dataset {name!r}: {message}")


def _mapping(where: Path, name: str, field: str, raw: Any, allowed: set[str]) -> dict:
    """``raw`` as a mapping with only ``allowed`` keys, else the error naming the field."""
    if not isinstance(raw, dict):
        raise _error(where, name, f"{field}is {type(raw).__name__}, expected a mapping")
    unknown = set(raw) - allowed
    if unknown:
        raise _error(where, name, f"{field}has unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    return raw


def _file(where: Path, name: str, index: int, raw: Any) -> DataFile:
    field = f"files[{index}]"
    raw = _mapping(where, name, f"{field} ", raw, _FILE_KEYS)
    path = raw.get("path")
    if not isinstance(path, str) or not path or Path(path).is_absolute() or ".." in Path(path).parts:
        raise _error(where, name, f"{field}.path={path!r} must be a relative path inside the data folder")
    sources = raw.get("sources")
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) for s in sources):
        raise _error(where, name, f"{field}.sources must be a non-empty list of URLs")
    for source in sources:
        if not source.startswith(("http://", "https://")):
            raise _error(where, name, f"{field}.sources: {source!r} is not an http(s) URL")
    sha256 = raw.get("sha256")
    if sha256 is not None and not (isinstance(sha256, str) and _SHA256.match(sha256)):
        raise _error(where, name, f"{field}.sha256={sha256!r} is not 64 lowercase hex digits (or null)")
    size = raw.get("size")
    if size is not None and not (isinstance(size, int) and size > 0):
        raise _error(where, name, f"{field}.size={size!r} must be a positive number of bytes (or null)")
    archive, member = raw.get("archive"), raw.get("member")
    if (archive is None) != (member is None):
        raise _error(where, name, f"{field}: archive and member go together (got archive={archive!r})")
    if archive is not None and (Path(archive).is_absolute() or ".." in Path(archive).parts):
        raise _error(where, name, f"{field}.archive={archive!r} must be a relative path inside the data folder")
    return DataFile(
        path=path,
        sources=tuple(sources),
        sha256=sha256,
        size=size,
        checksum_from=raw.get("checksum_from"),
        archive=archive,
        member=member,
    )


def _dataset(where: Path, name: str, raw: Any) -> Dataset:
    raw = _mapping(where, name, "", raw, _DATASET_KEYS)
    files = raw.get("files")
    if not isinstance(files, list) or not files:
        raise _error(where, name, "files must be a non-empty list")
    for key in ("license", "citation"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise _error(where, name, f"{key} is required (a line of text)")
    return Dataset(
        name=name,
        description=str(raw.get("description", "")),
        configs=tuple(raw.get("configs") or (name,)),
        license=raw["license"],
        citation=raw["citation"].strip(),
        homepage=str(raw.get("homepage", "")),
        files=tuple(_file(where, name, i, f) for i, f in enumerate(files)),
        note=str(raw.get("note", "")).strip(),
        registry=str(where),
    )


def read_registry(path: Path) -> dict[str, Dataset]:
    """Every dataset of one registry file, checked."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise RegistryError(f"registry file {path} does not exist") from error
    except yaml.YAMLError as error:
        raise RegistryError(f"{path}: not valid YAML ({error})") from error
    if not isinstance(raw, dict) or not isinstance(raw.get("datasets"), dict):
        raise RegistryError(f"{path}: expected a mapping with a 'datasets' mapping of name -> dataset")
    return {str(name): _dataset(path, str(name), entry) for name, entry in raw["datasets"].items()}


def load_registry(extra: list[Path] | tuple[Path, ...] = ()) -> dict[str, Dataset]:
    """The packaged registry, then each of ``extra`` in order (a later entry replaces one of the same name)."""
    datasets = read_registry(BUILTIN_REGISTRY)
    for path in extra:
        datasets.update(read_registry(Path(path)))
    return datasets


def dataset_for_path(path: Path, data_dir: Path, datasets: dict[str, Dataset] | None = None) -> Dataset | None:
    """The registered dataset whose fetch puts a file at ``path``, or files under it (a BEIR folder), if any:
    a missing file's error names the fetch that makes it."""
    datasets = load_registry() if datasets is None else datasets
    target = Path(path).resolve()
    for dataset in datasets.values():
        for file in dataset.files:
            fetched = (Path(data_dir) / file.path).resolve()
            if fetched == target or target in fetched.parents:
                return dataset
    return None


def fetch_hint(path: Path, data_dir: str | Path | None) -> str:
    """``fetch it with: python -m harness.data fetch NAME ...; `` when a registered dataset's fetch makes
    ``path`` (for the missing file's error), else nothing."""
    if data_dir is None:
        return ""
    try:
        dataset = dataset_for_path(path, Path(str(data_dir)))
    except RegistryError:
        return ""
    if dataset is None:
        return ""
    return f"fetch it with: python -m harness.data fetch {dataset.name} (into paths.data_dir={data_dir}); "
