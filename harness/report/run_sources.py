"""What runs read and where they ran, from their summary.json's ``data`` and ``machine`` blocks, in words: the
report's runs table and the replication page's provenance lines. A summary written before runs recorded them
has neither and is left out."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

SHORT = 12  # hex digits of a sha256 shown: enough to tell files apart, the summary keeps the whole digest


def data_words(data: Mapping[str, Any] | None) -> str | None:
    """``demo_multihop.json` sha256 `4a026cb0dec2` (17,907 bytes); 12 questions read, seed 42``."""
    if not data:
        return None
    files = []
    for entry in data.get("files") or []:
        name = Path(str(entry.get("path"))).name
        digest = entry.get("sha256")
        size = entry.get("bytes")
        role = "id list " if entry.get("key") == "question_ids_file" else ""  # the list that chose the questions
        shown = f"{role}`{name}`"
        files.append(f"{shown} sha256 `{str(digest)[:SHORT]}` ({size:,} bytes)" if digest else f"{shown} (missing)")
    read = f"{data.get('records')} questions read"
    if data.get("sample_size") is not None:
        read += f" (sample_size {data['sample_size']})"
    seed = f", seed {data['seed']}" if data.get("seed") is not None else ""
    return f"{', '.join(files) or '`' + str(data.get('name')) + '`'}; {read}{seed}"


def machine_words(machine: Mapping[str, Any] | None) -> str | None:
    """``AMD EPYC (avx2), 2 cores, 23.5 GiB, no GPU`` or ``..., 1 GPU: NVIDIA H100 80GB HBM3 (79.1 GiB)``."""
    if not machine:
        return None
    gpus = machine.get("gpus") or []
    names = Counter(f"{gpu.get('name')} ({gpu.get('memory_gib')} GiB)" for gpu in gpus)
    shown = ", ".join(f"{n} x {name}" if n > 1 else name for name, n in names.items())
    gpu = f"{len(gpus)} GPU{'s' if len(gpus) > 1 else ''}: {shown}" if gpus else "no GPU"
    return (
        f"{machine.get('cpu')} ({machine.get('cpu_kind')}), {machine.get('cores')} cores, "
        f"{machine.get('memory_gib')} GiB, {gpu}"
    )


def _counted(words: Iterable[str | None]) -> str:
    counts = Counter(w for w in words if w)
    return "; ".join(f"{w} ({n} run{'s' if n > 1 else ''})" if len(counts) > 1 else w for w, n in counts.items())


def source_lines(summaries: Iterable[Mapping[str, Any]]) -> list[str]:
    """``Data read: ...`` and ``Ran on: ...``: each distinct data set and machine of the runs (with how many
    runs when they differ); empty when no summary records them."""
    summaries = list(summaries)
    data = _counted(data_words(s.get("data")) for s in summaries)
    machines = _counted(machine_words(s.get("machine")) for s in summaries)
    lines = [f"Data read: {data}." if data else "", f"Ran on: {machines}." if machines else ""]
    return [line for line in lines if line]


def data_files(rows: pd.DataFrame) -> str:
    """Which file the rows' questions came from and how many they are, per dataset: ```FILE`` sha256 ``PREFIX``
    (485 questions, the ones ``IDS`` lists)`: the sha256 the runs recorded (their summary.json's ``data``; left
    out for runs that predate it or disagree) and the ids file that chose them when one did
    (``dataset.question_ids_file``)."""
    described = []
    for dataset, group in rows.groupby(rows["dataset"].astype(str), sort=True):
        paths = group["cfg.dataset.path"].dropna().astype(str).unique() if "cfg.dataset.path" in group else []
        files = ", ".join(f"`{Path(p).name}`" for p in sorted(paths)) or f"`{dataset}`"
        digests = recorded_digests(group)
        if len(digests) == 1:
            files += f" sha256 `{digests.pop()[:SHORT]}`"
        ids = (
            group["cfg.dataset.question_ids_file"].dropna().astype(str).unique()
            if ("cfg.dataset.question_ids_file" in group)
            else []
        )
        chosen = f", the ones `{'`, `'.join(Path(i).name for i in sorted(ids))}` lists" if len(ids) else ""
        described.append(f"{files} ({group['qkey'].nunique()} questions{chosen})")
    return "; ".join(described)


def recorded_digests(rows: pd.DataFrame) -> set[str]:
    """The sha256 of the dataset file (``dataset.path``) each run of ``rows`` recorded in its summary.json."""
    digests = set()
    for run_dir in rows["run_dir"].dropna().astype(str).unique() if "run_dir" in rows else []:
        try:
            data = json.loads((Path(run_dir) / "summary.json").read_text(encoding="utf-8")).get("data") or {}
        except (OSError, ValueError, AttributeError):
            return set()
        recorded = [f.get("sha256") for f in data.get("files") or [] if f.get("key") == "path"]
        if not recorded or not recorded[0]:
            return set()  # a run that predates the record: say nothing rather than half the story
        digests.add(str(recorded[0]))
    return digests
