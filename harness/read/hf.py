"""The default reader: a Hugging Face model in ``Trainer.predict``, decoded row by row (batch-invariant,
``harness.read.row_decoding``) or by the library's batched ``generate`` (beam search, encoder-decoders)."""

from __future__ import annotations

from typing import Any

from harness.backends.loading import dtype_name
from harness.backends.precision import machine_cpu_kind
from harness.core.threads import resolve_threads
from harness.read.local import LocalReader, device_field, threads_field
from harness.read.row_settings import STEPS, row_attention_field

DECODINGS = ("rows", "generate")
# Prompts handed to the row decoder per predict step, per decoding row: rows whose answers end take the
# next prompt of the step, so the fixed-width decoding seldom carries idle rows.
PROMPTS_PER_ROW = 4
# Tokens of one packed prefill on CUDA (harness.read.row_decoding): a whole chunk per forward keeps a GPU busy
# where a short prompt alone is launch-bound. A CPU prefills each prompt alone: its matmuls are compute-bound at
# any length, and padding a chunk would only add work.
CUDA_PREFILL_TOKENS = 8192


class TransformersReader(LocalReader):
    """A transformers model behind the response cache. ``decoding`` (unset: by ``num_beams``): ``rows``
    (greedy, each prompt prefilled alone and decoded in ``batch_size`` rows, so an answer never depends on
    the prompts read with it) or ``generate`` (the library's batched ``generate`` with left padding: beam search, and
    encoder-decoder models such as Flan-T5). Its id carries no ``backend=`` field (kept as it was, so
    existing caches stay valid)."""

    backend = "transformers"

    def __init__(
        self,
        name: str,
        decoding: str | None = None,
        prefill_tokens: int | None = None,
        sync_every: int | None = None,
        decode_step: str = "host",
        **settings: Any,
    ) -> None:
        # Unset: rows for greedy decoding, the library's generate for beam search.
        decoding = decoding or ("rows" if int(settings.get("num_beams", 1)) == 1 else "generate")
        if decoding not in DECODINGS:
            raise ValueError(f"reader {name!r}: decoding must be one of {DECODINGS}, got {decoding!r}")
        if decoding == "rows" and int(settings.get("num_beams", 1)) != 1:
            raise ValueError(
                f"reader {name!r}: decoding=rows is greedy; beam search (num_beams > 1) needs decoding=generate"
            )
        if prefill_tokens is not None and int(prefill_tokens) < 0:
            raise ValueError(
                f"reader {name!r}: prefill_tokens must be >= 0 (0: each prompt alone), got {prefill_tokens}"
            )
        if sync_every is not None and int(sync_every) < 1:
            raise ValueError(
                f"reader {name!r}: sync_every must be >= 1 (unset: 1 on a CPU, 8 on a GPU), got {sync_every}"
            )
        if decode_step not in STEPS:
            raise ValueError(f"reader {name!r}: decode_step must be one of {STEPS}, got {decode_step!r}")
        if decode_step != "host" and decoding != "rows":
            raise ValueError(f"reader {name!r}: decode_step={decode_step} is a step of decoding=rows")
        self.decoding = decoding
        self._prefill_tokens = prefill_tokens
        self.decode_step = decode_step
        # Decoding steps per read of the chosen tokens by the host (harness.read.row_decoding): when rows are
        # refilled, never an answer, so not in the reader id.
        self.sync_every = None if sync_every is None else int(sync_every)
        super().__init__(name, **settings)

    @property
    def prefill_tokens(self) -> int:
        """Tokens of one packed prefill of the row decoder (0: each prompt alone); unset: 8192 on CUDA, 0 on a CPU."""
        if self._prefill_tokens is not None:
            return int(self._prefill_tokens)
        return CUDA_PREFILL_TOKENS if self.on_cuda else 0

    @property
    def full_precision(self) -> bool:
        return dtype_name(self.spec.dtype) == "float32" and self.spec.quantization is None

    @property
    def reader_id(self) -> str:
        """Everything that changes an answer for a given prompt: weights, precision and decoding."""
        return (
            f"{self.model_id}|dtype={self.dtype_name}|quant={self.spec.quantization or 'none'}"
            f"|decode=greedy|beams={self.num_beams}|max_new_tokens={self.max_new_tokens}"
            + ("|kernels=hub" if self.spec.kernels else "")
            + self.batch_field
            # A replayed graph runs the eager step's kernels, but a library may choose others under capture.
            + ("|step=graph" if self.decode_step == "graph" else "")
            + threads_field(self.keyed_threads)
            + device_field(self.device_kind)
        )

    @property
    def threads(self) -> int:
        """The torch threads that read: ``torch_threads``, else this job's share of the CPUs."""
        return resolve_threads(self.torch_threads, f"reader {self.name!r} (torch)")

    @property
    def keyed_threads(self) -> int | None:
        return None if self.full_precision or self.on_cuda else self.threads

    @property
    def batch_field(self) -> str:
        """What of the batching changes an answer. In float32 nothing: left padding moves the last-token
        logits by ~1e-5 (50 of 50 HotpotQA answers equal at batch 1 and 8), and the row decoder's answers
        equal ``generate``'s at batch 1. In bf16 padding moves them by up to ~0.8 (8 of 50 changed), so
        ``generate`` at a batch size above 1 is keyed by it (``batch=``); the row decoder is independent of
        the company but computes its decoding steps ``batch_size`` rows wide, a matmul shape whose rounding
        is the kernel's (``rows=``), and the kernel is the CPU's (``cpu=``: AMX and AVX-512 round differently).
        On CUDA the decoding steps attend through the Triton kernel (``attn=``), whose sums differ from the
        library's per-row calls that GPU answers were read with before. A packed prefill (``prefill=``) computes
        each prompt's keys in a chunk of that many tokens, not at the prompt's own length, and on CUDA attends
        through its own kernel (``prefill_attn=``), whose sums differ from the library's per-prompt calls."""
        if self.full_precision:
            return ""
        if self.decoding == "generate":
            return "" if self.batch_size == 1 else f"|batch={self.batch_size}"
        packed = f"|prefill={self.prefill_tokens}" if self.prefill_tokens else ""
        on_cuda = row_attention_field(self.device_kind, packed=bool(self.prefill_tokens))
        kernels = on_cuda if self.on_cuda else f"|cpu={machine_cpu_kind()}"
        return f"|rows={self.batch_size}{packed}{kernels}"

    @property
    def batch_invariant(self) -> bool:
        """Whether a prompt's answer is independent of the prompts generated with it."""
        return self.decoding == "rows" or self.full_precision or self.batch_size == 1

    @property
    def prompts_per_step(self) -> int:
        return self.batch_size * (PROMPTS_PER_ROW if self.decoding == "rows" else 1)

    def build_module(self):
        """The module with its weights; when the reader runs as several processes, each process loads its
        own in ``setup`` (the parent holds none)."""
        from harness.read.module import ReaderModule

        per_process = self.processes != 1
        model, tokenizer = (None, self.spec.load_tokenizer()) if per_process else self.spec.load()
        if self._tokenizer is None:
            self._tokenizer = tokenizer
        return ReaderModule(
            model,
            self.tokenizer,
            max_new_tokens=self.max_new_tokens,
            num_beams=self.num_beams,
            add_special_tokens=self.add_special_tokens,
            placed=self.spec.placed,
            torch_threads=self.threads,
            loader=self.spec.load if per_process else None,
            decode_width=self.batch_size if self.decoding == "rows" else None,
            prefill_tokens=self.prefill_tokens,
            sync_every=self.sync_every,
            decode_step=self.decode_step,
        )
