"""Measured rates that a sweep preview (``python -m harness.preview``) prices its jobs with.

Every figure is one the documentation reports with the command that measured it and the machine it ran on;
``tests/test_plan_sweep.py`` checks that each page still shows the figure and the command. A reader with no
rate of its own is priced, on a GPU, from the measured Qwen2.5-7B rung of the same precision scaled by
parameters (a decoder reads a prompt in time about proportional to its weights); on a CPU, or through vLLM,
it is left unpriced rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rate:
    name: str  # a reader config's ``name``, or ``selection`` / ``job``
    device: str  # cpu or gpu
    figure: str  # as the page prints it
    unit: str  # s/question, prompts/s or s/job
    machine: str
    page: str
    command: str

    @property
    def seconds(self) -> float:
        """Seconds per question (per job for ``s/job``)."""
        value = float(self.figure)
        return 1.0 / value if self.unit.endswith("/s") else value


GPU_CHECK = (
    "PYTHONPATH=/tmp/bundle/site:$PWD HF_HUB_OFFLINE=1 python3 benchmarks/gpu_check.py --bundle /tmp/bundle --out out/"
)
H200 = "one NVIDIA H200, random-weight model, 128 HotpotQA prompts, 24 new tokens"
FACTORIAL = ".venv/bin/python benchmarks/bench_factorial.py --cache-dir .cache/harness"

READ_RATES = (
    Rate(
        "qwen2.5-coder-0.5b",
        "cpu",
        "0.42",
        "s/question",
        "2-core AMX CPU, bf16 row decoding, 20 HotpotQA questions with gold paragraphs",
        "docs/readers.md",
        ".venv/bin/python benchmarks/bench_default_reader.py --questions 20",
    ),
    Rate(
        "smollm2-135m",
        "cpu",
        "3.71",
        "s/question",
        "2-core AVX2 CPU shared with other jobs, float32, batch 8",
        "docs/benchmarks.md",
        ".venv/bin/python benchmarks/bench_readers.py --questions 20 --rungs smollm2 qwen2.5-coder-0.5b --slots 1 4",
    ),
    Rate(
        "qwen2.5-coder-1.5b-gguf",
        "cpu",
        "13.6",
        "s/question",
        "2-core AVX2 CPU shared with other jobs, llama.cpp Q4_K_M, retrieved context at B = 160",
        "docs/benchmarks.md",
        "python -m harness dataset=hotpotqa reader=qwen2.5_coder_1.5b_gguf dataset.sample_size=30 logger=none",
    ),
    Rate("qwen2.5-7b", "gpu", "4.90", "prompts/s", f"{H200}, bf16, packed prefill", "docs/gpu.md", GPU_CHECK),
    Rate("qwen2.5-7b-nf4", "gpu", "5.50", "prompts/s", f"{H200}, NF4, packed prefill", "docs/gpu.md", GPU_CHECK),
)
# Everything before the reader, cold caches (embeddings and pools computed): 5 packers x 4 budgets x 3 seeds on
# 485 questions in 383.5 s, 75.9 packings/s; the fixed cost of a job (Hydra, rows, summary), warm: 0.89 s.
SELECTION = Rate(
    "selection",
    "cpu",
    "75.9",
    "packings/s",
    "2-core AVX2 CPU, cold caches, one process",
    "docs/benchmarks.md",
    FACTORIAL,
)
JOB = Rate("job", "cpu", "0.89", "s/job", "2-core AVX2 CPU, warm caches, one process", "docs/benchmarks.md", FACTORIAL)
REFERENCE_PARAMS = 7.62e9  # Qwen2.5-7B-Instruct, the GPU rung measured


@dataclass(frozen=True)
class ReadPrice:
    seconds: float | None  # per question; None when no measured rate applies
    basis: str  # where the figure comes from


def read_price(name: str, device: str, backend: str, quantized: bool, params: int | None) -> ReadPrice:
    """Seconds per question for reader ``name`` on ``device`` (cpu/gpu), and what the figure rests on."""
    for rate in READ_RATES:
        if rate.name == name and rate.device == device:
            return ReadPrice(rate.seconds, f"{rate.name}: {rate.figure} {rate.unit} ({rate.machine})")
    if device == "gpu" and backend == "transformers" and params:
        base = next(r for r in READ_RATES if r.name == ("qwen2.5-7b-nf4" if quantized else "qwen2.5-7b"))
        factor = params / REFERENCE_PARAMS
        return ReadPrice(
            base.seconds * factor, f"{base.name} on an H200 ({base.figure} {base.unit}) x {factor:.2f} for parameters"
        )
    return ReadPrice(None, f"no measured rate for {name} on a {device.upper()} ({backend})")
