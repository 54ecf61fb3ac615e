"""The default reader: a Hugging Face model's ``generate`` (greedy or beam search) in ``Trainer.predict``."""

from __future__ import annotations

from harness.backends.loading import resolve_dtype
from harness.core.threads import resolve_threads
from harness.read.local import LocalReader, device_field


class TransformersReader(LocalReader):
    """A transformers model behind the response cache. Its id carries no ``backend=`` field (kept as it
    was, so existing caches stay valid)."""

    backend = "transformers"

    @property
    def reader_id(self) -> str:
        """Everything that changes an answer for a given prompt: weights, precision and decoding."""
        return (
            f"{self.model_id}|dtype={self.dtype_name}|quant={self.spec.quantization or 'none'}"
            f"|decode=greedy|beams={self.num_beams}|max_new_tokens={self.max_new_tokens}"
            + ("" if self.batch_invariant else f"|batch={self.batch_size}")
            + device_field(self.device_kind)
        )

    @property
    def batch_invariant(self) -> bool:
        """Whether a prompt's answer is independent of the batch it is generated in. Left padding
        reorders the attention sums: in float32 the last-token logits move by ~1e-5 (50 of 50 HotpotQA
        answers equal at batch 1 and 8), in bf16 by up to ~0.8 (8 of 50 changed). Half precision (also
        ``auto`` where it chooses bf16: harness.backends.precision) and quantized weights at batch_size > 1
        are therefore not invariant, and the batch size joins the reader id."""
        full_precision = str(resolve_dtype(self.spec.dtype)) == "torch.float32" and self.spec.quantization is None
        return full_precision or self.batch_size == 1

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
            torch_threads=resolve_threads(self.torch_threads, f"reader {self.name!r} (torch)"),
            loader=self.spec.load if per_process else None,
        )
