"""What a vLLM reader needs before its engine starts: the engine's settings (``reader.vllm``), the interpreter
that has vLLM, its version, and the digest of a local model folder (the reader's identity holds both).

Nothing here imports vLLM or starts an engine: the config check and the reader's identity use these
without a worker (``harness.backends.vllm_engine`` runs the engine).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.model_files import files_signature

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV_PYTHON = PROJECT_ROOT / ".venv-vllm" / "bin" / "python"
CUDA_VENV_PYTHON = PROJECT_ROOT / ".venv-vllm-cuda" / "bin" / "python"  # `make setup-gpu` builds it
PYTHON_ENV = "HARNESS_VLLM_PYTHON"
# A weight shard of a 32B model is gigabytes; its identity reads its first and last MiB, its size and name.
WHOLE_FILE_BYTES = 64 << 20
EDGE_BYTES = 1 << 20


BATCH_INVARIANT_CAPABILITY = (8, 0)


class VllmUnavailableError(RuntimeError):
    """No interpreter with vLLM: names what was looked for and how to get one."""


@dataclass(frozen=True)
class VllmSettings:
    """The engine's settings (``reader.vllm``). ``max_model_len`` null: sized from the prompts (the longest
    one a job sends plus ``max_new_tokens``), the engine restarting only if a later job needs more."""

    python: str | None = None  # interpreter with vLLM; None: $HARNESS_VLLM_PYTHON, .venv-vllm, then this one
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1  # engine replicas, each in its own worker on its own devices; prompts split
    enable_prefix_caching: bool = True
    max_model_len: int | None = None
    quantization: str | None = None  # vLLM's own: awq, gptq, bitsandbytes, fp8, ...
    enforce_eager: bool = False  # True skips graph capture/compilation: faster start, slower decoding
    gpu_memory_utilization: float = 0.9
    cpu_kvcache_gib: int = 1  # VLLM_CPU_KVCACHE_SPACE on the CPU build
    cpu_threads: int | None = None  # CPU build: cores bound to its OpenMP threads; None: this job's share
    seed: int = 0
    start_timeout_s: float = 900.0
    # vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1); None: on where it runs, CUDA of compute capability
    # 8.0 and newer (see batch_invariant_mode)
    batch_invariant: bool | None = None

    def __post_init__(self) -> None:
        for name in ("tensor_parallel_size", "data_parallel_size", "cpu_kvcache_gib"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"vllm.{name} must be a positive integer, got {value!r}")
        for name in ("max_model_len", "cpu_threads"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"vllm.{name} must be a positive integer or null, got {value!r}")
        if self.batch_invariant is not None and not isinstance(self.batch_invariant, bool):
            raise ValueError(f"vllm.batch_invariant must be true, false or null, got {self.batch_invariant!r}")
        for name in ("enable_prefix_caching", "enforce_eager"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"vllm.{name} must be true or false, got {getattr(self, name)!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"vllm.gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}")

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any] | None) -> VllmSettings:
        settings = {str(k): v for k, v in dict(settings or {}).items()}
        known = {f.name for f in fields(cls)}
        unknown = set(settings) - known
        if unknown:
            raise ValueError(f"unknown vllm settings {sorted(unknown)}; allowed {sorted(known)}")
        return cls(**{k: v for k, v in settings.items() if v is not None})

    def prefix_caching(self, one_at_a_time: bool) -> bool:
        """Whether the engine reuses prefixes: never when it reads one sequence at a time, where a prefix
        computed for another prompt would bring that prompt's numerics into this one's answer."""
        return self.enable_prefix_caching and not one_at_a_time

    def identity(self, one_at_a_time: bool = False, batch_invariant: bool = False) -> str:
        """What of these settings can change an answer: the quantization, the tensor-parallel split (it
        reorders the sums), prefix reuse (a reused prefix was computed in another batch), reading one
        sequence at a time (:func:`reads_one_at_a_time`) and vLLM's batch-invariant kernels."""
        return (
            f"quant={self.quantization or 'none'}|tp={self.tensor_parallel_size}"
            + ("|prefix_cache" if self.prefix_caching(one_at_a_time) else "")
            + ("|seqs=1" if one_at_a_time else "")
            + ("|batch_invariant" if batch_invariant else "")
        )


def batch_invariant_mode(asked: bool | None, capabilities: list[tuple[int, int]]) -> bool:
    """Whether the engine runs in vLLM's batch-invariant mode (``VLLM_BATCH_INVARIANT=1``, documented for 0.32:
    NVIDIA GPUs of compute capability 8.0 and newer), given ``reader.vllm.batch_invariant`` and the compute
    capabilities of the GPUs it reads on (none: the CPU). Unset: on wherever it runs. Asked for where it
    cannot run: a ValueError naming the key."""
    supported = bool(capabilities) and all(tuple(c) >= BATCH_INVARIANT_CAPABILITY for c in capabilities)
    if asked is None:
        return supported
    if asked and not supported:
        where = (
            "on the CPU build, whose engine has no Triton backend"
            if not capabilities
            else (f"on GPUs of compute capability {sorted({f'{c[0]}.{c[1]}' for c in capabilities})}")
        )
        raise ValueError(
            "reader.vllm.batch_invariant=true: vLLM's batch-invariant mode needs CUDA of compute capability 8.0 "
            f"or newer, not {where}; leave it null (one sequence at a time keeps answers independent there)"
        )
    return bool(asked)


def reads_one_at_a_time(cuda: bool, batch_invariant: bool = False) -> bool:
    """Whether the engine reads one sequence at a time (``max_num_seqs`` 1, no prefix reuse), so that an
    answer depends on its own prompt alone: everywhere but in vLLM's batch-invariant mode on a GPU.

    vLLM's CPU build batches prompts continuously, and its GEMMs (oneDNN; AMX or AVX-512 in bf16) round a
    row differently with the number of rows they are given. SmolLM2-135M on 12 HotpotQA prompts, read all
    together, one at a time, reversed and odd ones first: in bfloat16 an answer changed; in float32 no token
    did, but every prompt's log-probabilities differed in the last bits with its company, so a near-tie
    could flip. One at a time without prefix reuse, tokens and log-probabilities were bit-identical in both.
    vLLM's own batch-invariant mode (``VLLM_BATCH_INVARIANT=1``) swaps in Triton kernels, which have no CPU
    backend: the engine dies on the first prompt. The cost is speed: SmolLM2-135M on 2 cores read 12 prompts
    at 8.1 questions/s batched and 1.5 one at a time in bfloat16 (3.3 and 1.0 in float32). On a GPU of
    compute capability 8.0 or newer the batch-invariant mode lets it batch again."""
    return not (cuda and batch_invariant)


def vllm_python(configured: str | None = None, cuda: bool = False) -> str:
    """The interpreter that runs the worker: ``configured``, else ``$HARNESS_VLLM_PYTHON``, else, on a CPU,
    the project's ``.venv-vllm`` (the CPU build ``make test`` installs) and then this interpreter when it can
    import vLLM. With CUDA visible (``cuda``) the CUDA build comes first (``.venv-vllm-cuda`` from ``make
    setup-gpu``, then this interpreter): ``.venv-vllm`` there would read every prompt on the CPU. Whichever is chosen,
    :func:`check_build` refuses a CPU build on a node with CUDA."""
    for candidate, origin in ((configured, "reader.vllm.python"), (os.environ.get(PYTHON_ENV), PYTHON_ENV)):
        if candidate:
            if not Path(candidate).is_file():
                raise VllmUnavailableError(f"{origin}={candidate}: no such interpreter")
            return str(candidate)
    here = sys.executable if importlib.util.find_spec("vllm") is not None else None
    venv = str(DEFAULT_VENV_PYTHON) if DEFAULT_VENV_PYTHON.is_file() else None
    cuda_venv = str(CUDA_VENV_PYTHON) if CUDA_VENV_PYTHON.is_file() else None
    for candidate in (cuda_venv, here, venv) if cuda else (venv, here):
        if candidate:
            return candidate
    raise VllmUnavailableError(
        f"no vLLM: {DEFAULT_VENV_PYTHON} does not exist and this interpreter cannot import vllm; "
        + (
            "on a GPU node: pip install vllm (a CUDA build) beside the harness, or "
            if cuda
            else "run `make vllm-venv`, or "
        )
        + f"point reader.vllm.python (or ${PYTHON_ENV}) at a Python with vLLM installed"
    )


# Prints the distribution providing ``vllm`` with its version, and the CUDA version of that environment's
# torch (read from torch/version.py: importing torch or vLLM would take seconds).
_BUILD_SCRIPT = """
import importlib.metadata as m, importlib.util as u, pathlib
d = m.packages_distributions()['vllm'][0]
spec = u.find_spec('torch')
build = {}
if spec is not None and spec.origin:
    exec((pathlib.Path(spec.origin).parent / 'version.py').read_text(), build)
print(f'{d}-{m.version(d)}')
print(build.get('cuda') or '')
"""


@lru_cache(maxsize=8)
def vllm_build(python: str) -> tuple[str, str | None]:
    """(``<distribution>-<version>`` of the package that provides ``vllm`` in ``python``'s environment --
    ``vllm`` on GPUs, ``vllm-cpu`` for the CPU build --, the CUDA version of its torch or None), read from
    metadata and files: no engine, no torch import."""
    result = subprocess.run([python, "-c", _BUILD_SCRIPT], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise VllmUnavailableError(f"{python} cannot find vLLM's package metadata: {result.stderr.strip()[-500:]}")
    lines = result.stdout.splitlines() + ["", ""]
    return lines[0].strip(), (lines[1].strip() or None)


def vllm_version(python: str) -> str:
    """``<distribution>-<version>`` of ``python``'s vLLM (see :func:`vllm_build`)."""
    return vllm_build(python)[0]


def check_build(python: str, cuda_devices: int) -> None:
    """Refuse a CPU build of vLLM where CUDA devices are visible: it would read every prompt on the CPU."""
    if cuda_devices <= 0:
        return
    version, torch_cuda = vllm_build(python)
    if version.startswith("vllm-cpu") or torch_cuda is None:
        raise VllmUnavailableError(
            f"{python} has a CPU build of vLLM ({version}, torch without CUDA) but {cuda_devices} CUDA device(s) "
            "are visible; install a CUDA build (pip install vllm) and point reader.vllm.python (or "
            f"${PYTHON_ENV}) at its Python, or set reader.allow_cpu=true and CUDA_VISIBLE_DEVICES='' to read "
            "on the CPU"
        )


def _file_digest(path: Path) -> str:
    stat = path.stat()
    digest = hashlib.sha256(f"{stat.st_size}".encode())
    with path.open("rb") as handle:
        if stat.st_size <= WHOLE_FILE_BYTES:
            digest.update(handle.read())
        else:
            digest.update(handle.read(EDGE_BYTES))  # a safetensors shard opens with its tensor index
            handle.seek(-EDGE_BYTES, os.SEEK_END)
            digest.update(handle.read(EDGE_BYTES))
    return digest.hexdigest()


@lru_cache(maxsize=16)
def _folder_digest(folder: str, signature: tuple) -> str:
    # ``signature`` (names, sizes, mtimes) only keys the memo: a changed folder is hashed again.
    digest = hashlib.sha256()
    for name, *_ in signature:
        digest.update(name.encode() + b"\0" + _file_digest(Path(folder) / name).encode())
    return digest.hexdigest()[:16]


def model_files_digest(model: str | Path) -> str:
    """A digest of a local model folder's files (configs, tokenizer and weights; files above 64 MiB by size,
    first and last MiB), or ``hub`` for a hub id, which vLLM resolves itself."""
    folder = Path(model)
    if not folder.is_dir():
        return "hub"
    return _folder_digest(str(folder.resolve()), files_signature(folder))
