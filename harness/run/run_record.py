"""What a run records of the data it read and of the machine it ran on (summary.json's ``data`` and
``machine``, the W&B run config, the report's provenance lines).

``data``: each file the dataset config names (``path``, ``aliases``, ``question_ids_file`` and any other
``*_path`` / ``*_file`` key; every file of a folder such as BEIR's; the packaged demo file for ``path: null``)
with its sha256 and size, the questions read, the id list's sha256 and the sampling settings. The digests are
the ones the run key took in the same read of each file, remembered under the file's stamp
(``harness.cache.file_hashes``): a rerun reads no file for them. ``machine``: the CPU's model and kind (the kind
of vector units ``harness.run.cpu_check`` names), the CPUs this process may use, the memory and the GPUs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.cache.file_hashes import file_sha256, files_under
from harness.cache.fingerprint import input_files
from harness.core.devices import probe_cuda
from harness.core.threads import available_cpus

GIB = 2**30
IDS_KEY = "question_ids_file"


def _file_entry(key: str, path: Path, folder: str | None) -> dict[str, Any]:
    return {"key": key, "path": str(path), "sha256": file_sha256(path, folder), "bytes": path.stat().st_size}


def _files(dataset: dict[str, Any], folder: str | None) -> list[dict[str, Any]]:
    entries = []
    if dataset.get("path") is None and str(dataset.get("_target_", "")).startswith("harness.data."):
        from harness.data.loader import packaged_format

        try:
            record_format = packaged_format(str(dataset.get("layout") or "auto"))
        except ValueError:
            record_format = None
        if record_format is not None and record_format.packaged is not None:
            with record_format.packaged() as packaged:
                entries.append(_file_entry("path", Path(packaged), folder))
    for key, path in input_files(dataset):
        found = files_under(path)
        if not found:
            entries.append({"key": key, "path": str(path), "sha256": None, "bytes": None})
        entries += [_file_entry(key, file, folder) for file in found]
    return entries


def sample_note(dataset: dict[str, Any] | DictConfig, records: int) -> str | None:
    """One line when ``dataset.sample_size`` asks for more questions than the dataset holds, else None."""
    size = dataset.get("sample_size")
    if size is None or isinstance(size, bool) or not isinstance(size, int) or size <= records:
        return None
    path = dataset.get("path")
    source = Path(str(path)).name if path else "the demo set" if dataset.get("name") == "demo" else "the dataset"
    ids = dataset.get(IDS_KEY)
    if ids:
        source = f"the questions {Path(str(ids)).name} lists of {source}"
    return f"dataset.sample_size={size} but {source} holds {records} questions: all {records} read"


def data_record(dataset_cfg: DictConfig | dict, examples: Sequence[Any], folder: str | None = None) -> dict[str, Any]:
    """The data a run read (see the module docstring); ``folder``: where file digests are remembered."""
    dataset = OmegaConf.to_container(dataset_cfg, resolve=True) if isinstance(dataset_cfg, DictConfig) else dataset_cfg
    assert isinstance(dataset, dict)
    files = _files(dataset, folder)
    ids = next((f["sha256"] for f in files if f["key"] == IDS_KEY), None)
    question_ids = "".join(f"{getattr(e, 'question_id', '')}\n" for e in examples)
    return {
        "name": dataset.get("name"),
        "files": files,
        "records": len(examples),  # the questions read, after the id list and the sample
        "question_ids_sha256": ids,  # sha256 of the dataset.question_ids_file's bytes
        "questions_sha256": hashlib.sha256(question_ids.encode("utf-8")).hexdigest(),  # the ids read, one a line
        "sample_size": dataset.get("sample_size"),
        "seed": dataset.get("seed"),
        "note": sample_note(dataset, len(examples)),
    }


def _memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def machine_record() -> dict[str, Any]:
    """The machine a run ran on: CPU model and kind, the CPUs this process may use (its affinity, as the
    readers' threads count them) and the machine's, memory in GiB, and each visible CUDA GPU."""
    import platform

    from harness.backends.precision import cpu_model, machine_cpu_kind

    model = cpu_model()
    if model == "unknown CPU":
        model = platform.processor() or platform.machine() or model
    memory = _memory_bytes()
    probe = probe_cuda()  # a CPU build of torch answers from its version file, without importing torch
    gpus = [
        {
            "name": gpu.name,
            "memory_gib": round(gpu.memory_bytes / GIB, 1),
            "capability": f"{gpu.capability[0]}.{gpu.capability[1]}",
        }
        for gpu in probe.gpus
    ]
    return {
        "cpu": model,
        "cpu_kind": machine_cpu_kind(),
        "cores": available_cpus(),
        "cores_machine": os.cpu_count(),
        "memory_gib": None if memory is None else round(memory / GIB, 1),
        "gpus": gpus,
    }
