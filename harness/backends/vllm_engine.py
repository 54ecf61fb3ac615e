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
import json
import logging
import os
import selectors
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.backends.vllm_setup import (
    DEFAULT_VENV_PYTHON,
    PYTHON_ENV,
    VllmSettings,
    VllmUnavailableError,
    batch_invariant_mode,
    check_build,
    model_files_digest,
    reads_one_at_a_time,
    vllm_python,
    vllm_version,
)
from harness.core import signals
from harness.core.threads import available_cpus, resolve_threads

# Re-exported: the reader, the config check and the tests import the engine's settings and helpers from here.
__all__ = [
    "DEFAULT_VENV_PYTHON",
    "PYTHON_ENV",
    "VllmGenerator",
    "VllmSettings",
    "VllmUnavailableError",
    "batch_invariant_mode",
    "model_files_digest",
    "reads_one_at_a_time",
    "vllm_python",
    "vllm_version",
]

log = logging.getLogger(__name__)

# The worker runs as a script, so its folder leads sys.path there: a folder of its own, since beside this
# module it would import harness/backends/http.py in place of the standard library's http.
WORKER = Path(__file__).with_name("vllm_worker") / "worker.py"


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
        elif process.returncode == 0:
            # A worker that ended cleanly leaves nothing to read; a failed or stopped one keeps its log, which
            # the error (or the start's log line) names.
            self.log_path.unlink(missing_ok=True)


def _shares(items: list, parts: int) -> list[list]:
    """``items`` dealt to ``parts`` replicas in turn (item i to replica i mod parts): prompts arrive sorted by
    length, so contiguous runs would give one replica all the long ones."""
    return [items[part::parts] for part in range(parts)]


def _dealt_back(shares: list[list]) -> list:
    """The items of :func:`_shares` in their first order."""
    merged: list = [None] * sum(len(share) for share in shares)
    for part, share in enumerate(shares):
        merged[part :: len(shares)] = share
    return merged


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
        cuda_devices: int = 0,
        batch_invariant: bool = False,
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
        self.cuda_devices = int(cuda_devices)  # visible CUDA devices the reader reads on (0: the CPU)
        # Continuous batching would make an answer depend on the prompts read with it (see the function),
        # unless vLLM's batch-invariant kernels compute (VLLM_BATCH_INVARIANT, set in each worker's environment).
        self.batch_invariant = bool(batch_invariant) and self.cuda_devices > 0
        self.one_at_a_time = reads_one_at_a_time(cuda=self.cuda_devices > 0, batch_invariant=self.batch_invariant)
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
            "enable_prefix_caching": s.prefix_caching(self.one_at_a_time),
            "enforce_eager": s.enforce_eager,
            "seed": s.seed,
            "trust_remote_code": self.trust_remote_code,
            "gpu_memory_utilization": s.gpu_memory_utilization,
        }
        if self.one_at_a_time:
            engine["max_num_seqs"] = 1
        if s.tensor_parallel_size > 1:
            engine["tensor_parallel_size"] = s.tensor_parallel_size
        if self.in_one_process:
            engine["distributed_executor_backend"] = "uni"
        if s.quantization:
            engine["quantization"] = s.quantization
        return engine

    @property
    def in_one_process(self) -> bool:
        """The CPU build's engine runs inside its worker, not in two more processes importing vLLM and torch
        again (30 s to start instead of 14 on one core): reading one sequence at a time on a CPU, a separate
        engine core has no GPU work to overlap its scheduling with. GPU readers keep vLLM's processes."""
        return self.cuda_devices == 0 and self.settings.tensor_parallel_size == 1

    def _environments(self) -> list[dict[str, str]]:
        """Each replica's environment: its own GPUs (``tensor_parallel_size`` of them, from those visible) and
        its own contiguous share of this job's CPU cores, to which the CPU build binds its OpenMP threads."""
        replicas, per_replica = self.settings.data_parallel_size, self.settings.tensor_parallel_size
        base = dict(os.environ)
        # The worker imports nothing from the harness; a PYTHONPATH meant for this venv would mix packages.
        base.pop("PYTHONPATH", None)
        base.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")  # by default the CPU build keeps a core idle
        base.setdefault("VLLM_CPU_KVCACHE_SPACE", str(self.settings.cpu_kvcache_gib))
        base.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        base.setdefault("VLLM_NO_USAGE_STATS", "1")
        base.setdefault("TOKENIZERS_PARALLELISM", "false")
        # Set either way: a VLLM_BATCH_INVARIANT inherited from the shell must not change answers behind an id.
        base["VLLM_BATCH_INVARIANT"] = "1" if self.batch_invariant else "0"
        if self.in_one_process:
            # Without this the CPU platform replaces the "uni" executor by "mp" (a process per model runner).
            base["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        threads = resolve_threads(self.settings.cpu_threads, "vLLM (CPU build)")
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(available_cpus()))
        # Fewer cores than replicas: those without a core of their own share the job's.
        size, extra = divmod(threads, replicas)
        starts = [part * size + min(part, extra) for part in range(replicas + 1)]
        cores = [cpus[starts[part] : starts[part + 1]] or cpus[:threads] for part in range(replicas)]
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
        python = vllm_python(self.settings.python, cuda=self.cuda_devices > 0)
        check_build(python, self.cuda_devices)
        self.version = vllm_version(python)
        if self.max_model_len is None:
            self.max_model_len = 2048
        environments = self._environments()
        self._workers = [_Worker(python, env, f"replica {index}") for index, env in enumerate(environments)]
        log.info(
            "starting vLLM %s on %s (dtype %s, max_model_len %d%s, %d replica(s)); logs: %s",
            self.version,
            self.model,
            self.dtype,
            self.max_model_len,
            ", one sequence at a time" if self.one_at_a_time else "",
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
        texts = _dealt_back([reply["texts"] for reply in replies])
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
