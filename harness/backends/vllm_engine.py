"""The vLLM reader backend: vLLM's offline engine (continuous batching, prefix caching, tensor and data
parallelism) in a worker process run by the interpreter of the venv that holds vLLM.

vLLM pins its own torch and transformers (``make vllm-venv`` builds its CPU venv), so the engine never runs
in the harness's process: :class:`VllmGenerator` starts ``harness/backends/vllm_worker/worker.py`` with that
interpreter and sends it token ids. As with llama.cpp, the harness renders and counts every prompt with the
model's Hugging Face tokenizer and sends exactly those ids, so the budget counts what the model reads.

The worker is a process of its own, so a stop never waits for it: the reader polls for the reply in short
steps and, on SIGTERM/SIGINT, kills the worker and raises at once (answers of finished batches are already
in the response cache).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core import signals
from harness.core.model_files import files_signature
from harness.core.threads import available_cpus, resolve_threads

log = logging.getLogger(__name__)

# The worker runs as a script, so its folder leads sys.path there: a folder of its own, since beside this
# module it would import harness/backends/http.py in place of the standard library's http.
WORKER = Path(__file__).with_name("vllm_worker") / "worker.py"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV_PYTHON = PROJECT_ROOT / ".venv-vllm" / "bin" / "python"
PYTHON_ENV = "HARNESS_VLLM_PYTHON"
# A weight shard of a 32B model is gigabytes; its identity reads its first and last MiB, its size and name.
WHOLE_FILE_BYTES = 64 << 20
EDGE_BYTES = 1 << 20


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

    def __post_init__(self) -> None:
        for name in ("tensor_parallel_size", "data_parallel_size", "cpu_kvcache_gib"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"vllm.{name} must be a positive integer, got {value!r}")
        for name in ("max_model_len", "cpu_threads"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"vllm.{name} must be a positive integer or null, got {value!r}")
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

    @property
    def identity(self) -> str:
        """What of these settings can change an answer: the quantization, the tensor-parallel split (it
        reorders the sums) and prefix reuse (a reused prefix was computed in another batch)."""
        return f"quant={self.quantization or 'none'}|tp={self.tensor_parallel_size}" + (
            "|prefix_cache" if self.enable_prefix_caching else ""
        )


def vllm_python(configured: str | None = None) -> str:
    """The interpreter that runs the worker: ``configured``, else ``$HARNESS_VLLM_PYTHON``, else the project's
    ``.venv-vllm``, else this interpreter when it can import vLLM (a GPU machine with vLLM installed)."""
    for candidate, origin in ((configured, "reader.vllm.python"), (os.environ.get(PYTHON_ENV), PYTHON_ENV)):
        if candidate:
            if not Path(candidate).is_file():
                raise VllmUnavailableError(f"{origin}={candidate}: no such interpreter")
            return str(candidate)
    if DEFAULT_VENV_PYTHON.is_file():
        return str(DEFAULT_VENV_PYTHON)
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    raise VllmUnavailableError(
        f"no vLLM: {DEFAULT_VENV_PYTHON} does not exist and this interpreter cannot import vllm; "
        f"run `make vllm-venv`, or point reader.vllm.python (or ${PYTHON_ENV}) at a Python with vLLM installed"
    )


@lru_cache(maxsize=8)
def vllm_version(python: str) -> str:
    """``<distribution>-<version>`` of the package that provides ``vllm`` in ``python``'s environment (``vllm``
    on GPUs, ``vllm-cpu`` for the CPU build), read from its metadata: no engine, no torch import."""
    script = "import importlib.metadata as m; d = m.packages_distributions()['vllm'][0]; print(f'{d}-{m.version(d)}')"
    result = subprocess.run(
        [python, "-c", script],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise VllmUnavailableError(f"{python} cannot find vLLM's package metadata: {result.stderr.strip()[-500:]}")
    return result.stdout.strip()


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


class _Worker:
    """One engine replica: the worker process, its log file and the devices it may use."""

    def __init__(self, python: str, env: dict[str, str], label: str) -> None:
        handle, name = tempfile.mkstemp(prefix="vllm-worker-", suffix=".log")
        self.log_path = Path(name)
        self.label = label
        self.process = subprocess.Popen(
            [python, str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=handle,
            env=env,
            start_new_session=True,  # its engine processes go with it when it is killed
        )
        os.close(handle)

    def send(self, request: dict) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps(request) + "\n").encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it died: reported by the wait, with its log

    def log_tail(self, lines: int = 25) -> str:
        if not self.log_path.is_file():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def close(self, kill: bool = False) -> None:
        """End of input lets it exit; ``kill`` (or a worker that lingers) ends its whole process group."""
        process = self.process
        if process.poll() is not None:
            return
        if not kill and process.stdin is not None:
            try:
                process.stdin.close()
                process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                kill = True
        if kill or process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


def _shares(items: list, parts: int) -> list[list]:
    """``items`` cut into ``parts`` contiguous runs of near-equal length (the first ones longer by one)."""
    size, extra = divmod(len(items), parts)
    bounds = [0]
    for index in range(parts):
        bounds.append(bounds[-1] + size + (index < extra))
    return [items[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


class VllmGenerator:
    """Greedy completion of already-rendered prompts by vLLM engines in worker processes: one engine, or with
    ``data_parallel_size`` > 1 one per replica (each on its own GPUs, or its own share of the CPU cores), every
    request split among them and the answers put back in order."""

    def __init__(
        self,
        model: str | Path,
        tokenizer,
        max_new_tokens: int,
        dtype: str,
        settings: VllmSettings | None = None,
        add_special_tokens: bool = False,
        trust_remote_code: bool = False,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.model = str(model)
        self.tokenizer = tokenizer
        self.max_new_tokens = int(max_new_tokens)
        self.dtype = dtype
        self.settings = settings or VllmSettings()
        self.add_special_tokens = add_special_tokens
        self.trust_remote_code = trust_remote_code
        self.max_model_len = self.settings.max_model_len
        self._workers: list[_Worker] = []
        self.version: str | None = None
        self.start_seconds: float | None = None
        # Totals over every request, for benchmarks.
        self.prompt_tokens = 0
        self.cached_tokens = 0
        atexit.register(self.close)  # no engine outlives the run

    # ---- the workers ----------------------------------------------------------------------------

    def reserve(self, tokens: int) -> None:
        """Make room for prompts of up to ``tokens`` tokens plus the answer: sizes the engine before it
        starts, or restarts one started smaller (``max_model_len`` null only; a set value is a limit)."""
        needed = int(tokens) + self.max_new_tokens
        if self.settings.max_model_len is not None:
            return  # encode() refuses what does not fit, naming the setting
        size = max(512, 1 << (needed - 1).bit_length())  # powers of two: few restarts as budgets grow
        if self.max_model_len is None or self.max_model_len < needed:
            if self._workers:
                log.info("vLLM: prompts of %d tokens need max_model_len %d: restarting the engine", tokens, size)
                self.close()
            self.max_model_len = size

    def _engine_args(self) -> dict[str, Any]:
        s = self.settings
        engine: dict[str, Any] = {
            "model": self.model,
            "tokenizer": self.model,
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "enable_prefix_caching": s.enable_prefix_caching,
            "enforce_eager": s.enforce_eager,
            "seed": s.seed,
            "trust_remote_code": self.trust_remote_code,
            "gpu_memory_utilization": s.gpu_memory_utilization,
        }
        if s.tensor_parallel_size > 1:
            engine["tensor_parallel_size"] = s.tensor_parallel_size
        if s.quantization:
            engine["quantization"] = s.quantization
        return engine

    def _environments(self) -> list[dict[str, str]]:
        """Each replica's environment: its own GPUs (``tensor_parallel_size`` of them, from those visible) and
        its own share of this job's CPU cores, to which the CPU build binds its OpenMP threads."""
        replicas, per_replica = self.settings.data_parallel_size, self.settings.tensor_parallel_size
        base = dict(os.environ)
        # The worker imports nothing from the harness; a PYTHONPATH meant for this venv would mix packages.
        base.pop("PYTHONPATH", None)
        base.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")  # by default the CPU build keeps a core idle
        base.setdefault("VLLM_CPU_KVCACHE_SPACE", str(self.settings.cpu_kvcache_gib))
        base.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        base.setdefault("VLLM_NO_USAGE_STATS", "1")
        base.setdefault("TOKENIZERS_PARALLELISM", "false")
        threads = resolve_threads(self.settings.cpu_threads, "vLLM (CPU build)")
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(available_cpus()))
        # Fewer cores than replicas: those without a core of their own share the job's.
        cores = [share or cpus[:threads] for share in _shares(cpus[:threads], replicas)]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpus = visible.split(",") if visible else [str(i) for i in range(replicas * per_replica)]
        environments = []
        for replica in range(replicas):
            env = dict(base)
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(str(c) for c in cores[replica]))
            if replicas > 1:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[replica * per_replica : (replica + 1) * per_replica])
            environments.append(env)
        return environments

    def _start(self) -> None:
        python = vllm_python(self.settings.python)
        self.version = vllm_version(python)
        if self.max_model_len is None:
            self.max_model_len = 2048
        environments = self._environments()
        self._workers = [_Worker(python, env, f"replica {index}") for index, env in enumerate(environments)]
        log.info(
            "starting vLLM %s on %s (dtype %s, max_model_len %d, %d replica(s)); logs: %s",
            self.version,
            self.model,
            self.dtype,
            self.max_model_len,
            len(self._workers),
            ", ".join(str(w.log_path) for w in self._workers),
        )
        request = {"op": "start", "engine": self._engine_args()}
        replies = self._exchange([(worker, request) for worker in self._workers], self.settings.start_timeout_s)
        self.start_seconds = max(float(reply["seconds"]) for reply in replies)
        log.info("vLLM ready in %.1f s", self.start_seconds)

    def _exchange(self, requests: list[tuple[_Worker, dict]], timeout_s: float | None = None) -> list[dict]:
        """Send each worker its request, then wait for every reply in short steps, so a stop signal kills
        the workers at once instead of waiting for them."""
        for worker, request in requests:
            worker.send(request)
        pending = {id(worker): (index, worker, request) for index, (worker, request) in enumerate(requests)}
        replies: list[dict | None] = [None] * len(requests)
        began = time.monotonic()
        selector = selectors.DefaultSelector()
        for _, worker, _ in pending.values():
            selector.register(worker.process.stdout, selectors.EVENT_READ, worker)
        try:
            while pending:
                signals.check()  # the handler raises by itself, unless a deferred write held the signal
                for key, _ in selector.select(timeout=signals.POLL_SECONDS):
                    worker = key.data
                    line = worker.process.stdout.readline()
                    if line:
                        index, _, request = pending.pop(id(worker))
                        selector.unregister(worker.process.stdout)
                        replies[index] = self._checked(worker, request, json.loads(line))
                for _, worker, request in list(pending.values()):
                    if worker.process.poll() is not None:
                        self.close(kill=True)
                        raise RuntimeError(
                            f"the vLLM worker ({worker.label}) exited with status {worker.process.returncode} during "
                            f"{request['op']!r}; its log {worker.log_path} ends:\n{worker.log_tail()}"
                        )
                if pending and timeout_s is not None and time.monotonic() - began > timeout_s:
                    _, worker, request = next(iter(pending.values()))
                    self.close(kill=True)
                    raise TimeoutError(
                        f"the vLLM worker ({worker.label}) did not answer {request['op']!r} in {timeout_s:.0f} s "
                        f"(reader.vllm.start_timeout_s); its log {worker.log_path} ends:\n{worker.log_tail()}"
                    )
        except signals.Interrupted:
            # Raised wherever the wait was (in select, mostly): the engines' work is abandoned, not awaited.
            log.warning("stopping %d vLLM worker(s) mid-request", len(self._workers))
            self.close(kill=True)
            raise
        finally:
            selector.close()
        return [reply for reply in replies if reply is not None]

    def _checked(self, worker: _Worker, request: dict, reply: dict) -> dict:
        if not reply.get("ok"):
            self.close(kill=True)
            raise RuntimeError(
                f"vLLM ({worker.label}) failed on {request['op']!r} ({self.model}): {reply.get('error')}\n"
                f"{reply.get('traceback', '')}its log: {worker.log_path}"
            )
        return reply

    # ---- generation -----------------------------------------------------------------------------

    def encode(self, prompts: list[str]) -> list[list[int]]:
        """The token ids of each prompt, refused when a prompt and the answer do not fit ``max_model_len``."""
        ids = [list(x) for x in self.tokenizer(prompts, add_special_tokens=self.add_special_tokens)["input_ids"]]
        self.reserve(max((len(x) for x in ids), default=0))
        limit = (self.max_model_len or 0) - self.max_new_tokens
        for prompt_ids in ids:
            if len(prompt_ids) > limit:
                raise ValueError(
                    f"a prompt of {len(prompt_ids)} tokens does not fit vllm.max_model_len={self.max_model_len} "
                    f"with max_new_tokens={self.max_new_tokens}; raise reader.vllm.max_model_len or set it to null"
                )
        return ids

    def generate(self, prompts: list[str]) -> list[str]:
        """The generated text of each prompt, in order (special tokens not rendered)."""
        if not prompts:
            return []
        ids = self.encode(prompts)
        if not self._workers:
            self._start()
        shares = _shares(ids, len(self._workers))
        requests = [
            (
                worker,
                {
                    "op": "generate",
                    "prompt_token_ids": share,
                    "max_tokens": self.max_new_tokens,
                    "seed": self.settings.seed,
                },
            )
            for worker, share in zip(self._workers, shares, strict=True)
            if share
        ]
        replies = self._exchange(requests)
        texts = [text for reply in replies for text in reply["texts"]]
        if len(texts) != len(ids):
            raise RuntimeError(f"vLLM on {self.model}: {len(ids)} prompts but {len(texts)} answers")
        for reply in replies:
            self.prompt_tokens += sum(reply["prompt_tokens"])
            self.cached_tokens += sum(reply["cached_tokens"])
        return texts

    @property
    def prefix_cache_hit_rate(self) -> float:
        """The share of prompt tokens served from the prefix cache, over every request so far."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def close(self, kill: bool = False) -> None:
        """Stop every worker (``kill``: at once, without letting them finish)."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.close(kill=kill)
