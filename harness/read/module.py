"""The reader as a LightningModule: greedy (or beam) generation over batches of rendered prompts."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import pytorch_lightning as pl
import torch

from harness.read.answers import extract_answer


@contextmanager
def limited_torch_threads(count: int | None):
    """Decoding a small model is latency-bound: on a shared CPU fewer threads can be faster. The
    setting is process-wide, so it is restored afterwards."""
    if count is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def clean_answer(text: str) -> str:
    """The short answer in a generation (kept under this name for existing callers)."""
    return extract_answer(text)


def greedy_generation_config(model, tokenizer, max_new_tokens: int, num_beams: int = 1):
    """Deterministic decoding built from our settings only, so a checkpoint's own sampling defaults
    (temperature, top-p, repetition penalty) never change the answers behind a reader id."""
    from transformers import GenerationConfig

    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if num_beams < 1:
        raise ValueError(f"num_beams must be >= 1, got {num_beams}")
    own = model.generation_config
    return GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=False,
        num_beams=num_beams,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=own.eos_token_id if own.eos_token_id is not None else tokenizer.eos_token_id,
        bos_token_id=own.bos_token_id,
        decoder_start_token_id=own.decoder_start_token_id,
    )


class ReaderModule(pl.LightningModule):
    """Wraps a Hugging Face generator; ``predict_step`` returns ``[{prompt_key, answer, raw}]``
    (``raw`` is the whole generated text, ``answer`` the short answer extracted from it by
    ``harness.read.answers.extract_answer``).

    A model placed at load time (a device map, bitsandbytes weights) is kept out of the module's
    children, so Lightning never tries to move it; a plain model is a child that Lightning places.
    """

    def __init__(
        self,
        model,
        tokenizer,
        max_new_tokens: int = 24,
        num_beams: int = 1,
        add_special_tokens: bool = False,
        placed: bool = False,
        torch_threads: int | None = None,
        backend=None,
        loader=None,
        decode_width: int | None = None,
        prefill_tokens: int = 0,
        sync_every: int | None = None,
        decode_step: str = "host",
    ) -> None:
        super().__init__()
        # ``backend``: an object whose ``generate(prompts) -> texts`` replaces the Hugging Face model
        # (the llama.cpp backend); it holds no torch parameters, so Lightning has nothing to place.
        # ``loader``: a picklable ``() -> (model, tokenizer)`` called in ``setup``, so that under DDP each
        # process loads its own weights instead of receiving the parent's (through shared memory: a 7B bf16
        # model needs 15 GB of /dev/shm, and the parent would hold a copy it never computes with).
        object.__setattr__(self, "_backend", backend)
        object.__setattr__(self, "_loader", loader)
        if backend is not None and (model is not None or loader is not None):
            raise ValueError("ReaderModule takes a Hugging Face model or a generation backend, not both")
        if model is not None and loader is not None:
            raise ValueError("ReaderModule takes a loaded model or a loader, not both")
        self.placed = placed and backend is None
        self.torch_threads = torch_threads
        self.tokenizer = tokenizer
        self.add_special_tokens = add_special_tokens
        self.max_new_tokens = max_new_tokens
        self.num_beams = num_beams
        self.is_encoder_decoder = False
        self.generation_config = None
        # Rows decoded side by side by a causal LM (harness.read.row_decoding); None: the library's generate.
        self.decode_width = decode_width
        self.prefill_tokens = prefill_tokens  # the row decoder's packed prefill (0: each prompt alone)
        self.sync_every = sync_every  # the row decoder's steps per read by the host (None: by device)
        self.decode_step = decode_step  # the row decoder's step: host, static or graph
        if model is not None:
            self._attach(model)

    def _attach(self, model) -> None:
        if self.placed:
            object.__setattr__(self, "_placed_model", model)
        else:
            self.model = model
        self.is_encoder_decoder = bool(getattr(model.config, "is_encoder_decoder", False))
        if self.decode_width is not None and (self.is_encoder_decoder or self.num_beams != 1):
            raise ValueError(
                "row decoding needs a causal LM decoding greedily (reader.decoding=generate for an "
                "encoder-decoder model or beam search)"
            )
        self.generation_config = greedy_generation_config(model, self.tokenizer, self.max_new_tokens, self.num_beams)

    def setup(self, stage: str) -> None:
        """Load the weights here, in the process that computes with them (see ``loader``), once."""
        if self._loader is not None and self.generation_config is None:
            model, _ = self._loader()
            self._attach(model)

    @property
    def backend(self):
        return self._backend

    @property
    def generator(self):
        return self._placed_model if self.placed else self.model

    @property
    def input_device(self) -> torch.device:
        return self.generator.device if self.placed else self.device

    def generate(self, prompts: list[str]) -> list[str]:
        """The raw generated text of each prompt (special tokens removed)."""
        if self._backend is not None:
            return self._backend.generate(prompts)
        if self.decode_width is not None:
            return self._generate_rows(prompts)
        encoded = self.tokenizer(
            prompts, return_tensors="pt", padding=True, add_special_tokens=self.add_special_tokens
        ).to(self.input_device)
        with limited_torch_threads(self.torch_threads):
            output = self.generator.generate(**encoded, generation_config=self.generation_config)
        if not self.is_encoder_decoder:  # a causal LM echoes the (left-padded) prompt first
            output = output[:, encoded["input_ids"].shape[1] :]
        return self.tokenizer.batch_decode(output, skip_special_tokens=True)

    def _generate_rows(self, prompts: list[str]) -> list[str]:
        from harness.read.row_decoding import RowDecoder

        assert self.decode_width is not None and self.generation_config is not None
        eos = self.generation_config.eos_token_id
        decoder = RowDecoder(
            self.generator,
            self.decode_width,
            self.max_new_tokens,
            set(eos if isinstance(eos, list) else [] if eos is None else [eos]),
            self.tokenizer.pad_token_id or 0,
            prefill_tokens=self.prefill_tokens,
            sync_every=self.sync_every,
            step=self.decode_step,
        )
        ids = [self.tokenizer(p, add_special_tokens=self.add_special_tokens)["input_ids"] for p in prompts]
        with limited_torch_threads(self.torch_threads):
            generated = decoder.generate(ids)
        return [self.tokenizer.decode(tokens, skip_special_tokens=True) for tokens in generated]

    def predict_step(
        self, batch: dict[str, list[str]], batch_idx: int = 0, dataloader_idx: int = 0
    ) -> list[dict[str, Any]]:
        if not batch["prompts"]:  # padding that gives every process of a multi-process read a batch
            return []
        texts = self.generate(batch["prompts"])
        return [
            {"prompt_key": k, "answer": extract_answer(t), "raw": t} for k, t in zip(batch["keys"], texts, strict=False)
        ]


class ResponseCacheWriter(pl.Callback):
    """Commits each batch's answers to the response cache as soon as the batch is done, so a run
    killed part-way keeps everything it generated."""

    def __init__(self, store) -> None:
        self.store = store

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if self.store is not None and outputs:
            self.store.put_texts({row["prompt_key"]: {"answer": row["answer"], "raw": row["raw"]} for row in outputs})
