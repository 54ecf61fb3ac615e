"""A local Hugging Face causal LM as a ChatLM: chat template, greedy decoding, batched left padding.

The default is the packaged offline SmolLM2-135M-Instruct (converted once into a plain folder under the
models directory); any hub id or local folder works the same way, e.g.
``pretrained=deepseek-ai/DeepSeek-V2-Lite-Chat trust_remote_code=true``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from harness.core.threads import resolve_threads
from harness.lm.base import CachedChatLM

log = logging.getLogger(__name__)


def render_chat(tokenizer, system_prompt: str, prompt: str, max_input_tokens: int | None = None) -> str:
    """The full model input for one user prompt: the prompt cut to its first ``max_input_tokens``
    tokens, then the tokenizer's chat template (system message when ``system_prompt`` is not blank, the
    user message, the generation prompt); a tokenizer without a template gets the plain text."""
    if max_input_tokens is not None:
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if len(ids) > max_input_tokens:
            prompt = tokenizer.decode(ids[:max_input_tokens], skip_special_tokens=True)
    system_prompt = system_prompt or ""
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
        messages.append({"role": "user", "content": prompt})
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return f"{system_prompt.strip()}\n\n{prompt}".strip() if system_prompt.strip() else prompt


class LocalChatLM(CachedChatLM):
    """The weights are named by the reader's model keys (:class:`harness.backends.loading.ModelSpec`), as
    keyword arguments; ``offline_model`` defaults to the packaged SmolLM2."""

    backend = "transformers"

    def __init__(
        self,
        system_prompt: str = "",
        batch_size: int = 8,
        max_input_tokens: int | None = None,
        cache_dir: str | Path | None = None,
        torch_threads: int | None = None,
        name: str = "local",
        **model: Any,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"{name}: batch_size must be >= 1, got {batch_size}")
        if torch_threads is not None and torch_threads < 1:
            raise ValueError(f"{name}: torch_threads must be >= 1 or null, got {torch_threads}")
        if max_input_tokens is not None and max_input_tokens < 1:
            raise ValueError(f"{name}: max_input_tokens must be >= 1 or null, got {max_input_tokens}")
        # Imported here: loading imports torch, which an OpenAI-backed tree never needs.
        from harness.backends.loading import ModelSpec, resolve_dtype

        spec = ModelSpec.from_config(model, owner=name, offline_model="smollm2")
        if spec.pretrained is None and spec.offline_model is None:
            raise ValueError(f"{name}: give `pretrained` (hub id or local path) or `offline_model`")
        # An offline model is named by its package, not by the folder it was converted into, so the
        # cache survives a moved models directory.
        # The dtype ``auto`` chose on this machine, not ``auto``: bf16 and float32 summaries differ.
        dtype = str(resolve_dtype(spec.dtype)).replace("torch.", "")
        model_id = f"{spec.source}|dtype={dtype}|quant={spec.quantization}|max_in={max_input_tokens}"
        super().__init__(name=name, model_id=model_id, system_prompt=system_prompt, cache_dir=cache_dir)
        self.spec = spec
        self.batch_size = int(batch_size)
        self.max_input_tokens = max_input_tokens
        self.torch_threads = torch_threads
        self._model = None
        self._tokenizer = None

    def _load(self) -> None:
        self._model, self._tokenizer = self.spec.load()
        # Causal generation appends on the right, so every prompt in a batch must end flush right.
        self._tokenizer.padding_side = "left"

    @property
    def model(self):
        if self._model is None:
            self._load()
        return self._model

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._load()
        return self._tokenizer

    def render(self, prompt: str) -> str:
        """The full model input for one user prompt (chat template when the tokenizer has one)."""
        return render_chat(self.tokenizer, self.system_prompt, prompt, self.max_input_tokens)

    def _generate(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        import torch

        # torch_threads null: this job's share of the CPUs (harness.core.threads). The setting is process-wide,
        # so it is restored afterwards.
        previous = torch.get_num_threads()
        torch.set_num_threads(resolve_threads(self.torch_threads, f"{self.name} (torch)"))
        try:
            return self._generate_batches(prompts, max_new_tokens)
        finally:
            torch.set_num_threads(previous)

    def _generate_batches(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        import torch

        tokenizer, model = self.tokenizer, self.model
        rendered = [self.render(p) for p in prompts]
        # Longest first: rows of similar length share a batch, so little compute goes to padding.
        lengths = [len(tokenizer(r, add_special_tokens=False)["input_ids"]) for r in rendered]
        order = sorted(range(len(rendered)), key=lambda i: -lengths[i])
        outputs: list[str] = [""] * len(rendered)
        device = next(model.parameters()).device
        # A rendered chat prompt already holds its special tokens; a plain one gets the tokenizer's own.
        add_special = not bool(getattr(tokenizer, "chat_template", None))
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            enc = tokenizer(
                [rendered[i] for i in batch], return_tensors="pt", padding=True, add_special_tokens=add_special
            ).to(device)
            with torch.inference_mode():
                generated = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=tokenizer.pad_token_id,
                )
            self.prompt_tokens += int(enc["attention_mask"].sum())  # padding excluded
            new_tokens = generated[:, enc["input_ids"].shape[1] :]
            for i, row in zip(batch, new_tokens, strict=False):
                outputs[i] = tokenizer.decode(row, skip_special_tokens=True).strip()
        return outputs

    def continuation_logprobs(self, prompt: str, continuations: list[str]) -> list[list[float]]:
        """The log-probability of each token of each continuation after the rendered ``prompt``, as
        lm-evaluation-harness scores a multiple choice: the context's tokens and the continuation's, each
        encoded on its own, concatenated, and the continuation's tokens read off the model's logits. The
        context is run once and its KV cache reused for every continuation (cut back to the context after
        each), so four one-word replies cost one prompt's forward, not four."""
        import torch

        tokenizer, model = self.tokenizer, self.model
        add_special = not bool(getattr(tokenizer, "chat_template", None))
        context = tokenizer(self.render(prompt), add_special_tokens=add_special)["input_ids"]
        device = next(model.parameters()).device
        scores = []
        previous = torch.get_num_threads()
        torch.set_num_threads(resolve_threads(self.torch_threads, f"{self.name} (torch)"))
        try:
            from transformers import DynamicCache

            cache = DynamicCache(config=model.config)
            with torch.inference_mode():
                prefix = model(input_ids=torch.tensor([context], device=device), cache=cache, use_cache=True)
            last = prefix.logits[0, -1:].float()
            self.prompt_tokens += len(context)
            for continuation in continuations:
                tokens = tokenizer(continuation, add_special_tokens=False)["input_ids"]
                if not tokens:
                    raise ValueError(f"{self.name}: continuation {continuation!r} encodes to no tokens")
                logits = last
                if len(tokens) > 1:  # the logits after each continuation token but its last
                    with torch.inference_mode():
                        more = model(input_ids=torch.tensor([tokens[:-1]], device=device), cache=cache, use_cache=True)
                    cache.crop(-(len(tokens) - 1))  # back to the context alone
                    logits = torch.cat([last, more.logits[0].float()])
                logprobs = torch.log_softmax(logits, dim=-1)
                picked = logprobs.gather(1, torch.tensor(tokens, device=device).unsqueeze(1)).squeeze(1)
                scores.append([float(x) for x in picked])
                self.prompt_tokens += len(tokens)
        finally:
            torch.set_num_threads(previous)
        return scores
