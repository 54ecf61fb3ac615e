"""Getting the official dataset files: a registry of sources and checksums, and a verified, resumable fetch.

``python -m harness.data list`` shows every registered dataset; ``python -m harness.data fetch NAME...`` puts its
files under ``paths.data_dir`` where the dataset configs look for them (:mod:`harness.data.fetch.cli`).
"""

from harness.data.fetch.download import ChecksumMismatch, FetchError
from harness.data.fetch.extract import UnsafeArchive
from harness.data.fetch.fetch import fetch_dataset, fetch_file
from harness.data.fetch.registry import DataFile, Dataset, RegistryError, dataset_for_path, load_registry

__all__ = [
    "ChecksumMismatch",
    "DataFile",
    "Dataset",
    "FetchError",
    "RegistryError",
    "UnsafeArchive",
    "dataset_for_path",
    "fetch_dataset",
    "fetch_file",
    "load_registry",
]
