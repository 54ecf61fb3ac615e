"""The reader prompt: instruction, context and question, rendered through the model's chat template."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.text.tokens import encoded_lengths

# Reader settings that change how answers are generated but never a prompt or its token count: a packing is
# reused across them (harness.run.keys.packing_key, selection_key). An unlisted key counts, so a new one errs safe.
GENERATION_ONLY_KEYS = frozenset(
    {
        "batch_size",
        "max_new_tokens",
        "num_beams",
        "cache_dir",
        "trainer",
        "sort_by_length",
        "show_progress",
        "torch_threads",
        "llama_cpp",
        "vllm",
        "seed",  # a sampling seed (an API reader's, llama.cpp's): never part of a prompt
    }
)


def has_chat_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


@dataclass(frozen=True)
class PromptTemplate:
    """Short-answer QA prompt.

    ``answer_prefix`` opens the answer in plain-text prompts (models without a chat template); a chat
    prompt opens the assistant turn instead, so the prefix is not used there.
    """

    system: str = ""
    instruction: str = "Answer the question using the context. Reply with a short answer only (a few words)."
    context_header: str = "Context:"
    question_header: str = "Question:"
    answer_prefix: str = "Answer:"
    use_chat_template: bool = True

    def user_text(self, question: str, context_text: str) -> str:
        parts = [self.instruction.strip()] if self.instruction.strip() else []
        if context_text.strip():  # a closed-book prompt (empty context) carries no empty context block
            parts.append(f"{self.context_header}\n{context_text.strip()}")
        parts.append(f"{self.question_header} {question.strip()}".strip())
        return "\n\n".join(parts)

    def build_messages(self, question: str, context_text: str) -> list[dict[str, str]]:
        messages = [{"role": "system", "content": self.system}] if self.system.strip() else []
        messages.append({"role": "user", "content": self.user_text(question, context_text)})
        return messages

    def uses_chat(self, tokenizer) -> bool:
        return self.use_chat_template and has_chat_template(tokenizer)

    def render(self, tokenizer, question: str, context_text: str) -> str:
        if self.uses_chat(tokenizer):
            return tokenizer.apply_chat_template(
                self.build_messages(question, context_text), tokenize=False, add_generation_prompt=True
            )
        text = self.user_text(question, context_text)
        if self.system.strip():
            text = f"{self.system.strip()}\n\n{text}"
        return f"{text}\n{self.answer_prefix}".rstrip() if self.answer_prefix else text


def as_template(prompt: PromptTemplate | Mapping[str, Any] | None) -> PromptTemplate:
    """A template from itself, from a config node (its ``_target_`` ignored) or from nothing (the default)."""
    if prompt is None:
        return PromptTemplate()
    if isinstance(prompt, PromptTemplate):
        return prompt
    if isinstance(prompt, Mapping):
        return PromptTemplate(**{str(k): v for k, v in prompt.items() if str(k) != "_target_"})
    raise TypeError(f"prompt must be a PromptTemplate or a mapping, got {type(prompt).__name__}")


def add_special_tokens_for(template: PromptTemplate, tokenizer) -> bool:
    """A chat-rendered prompt already holds its special tokens; a plain one gets the tokenizer's own
    (for example T5's closing ``</s>``)."""
    return not template.uses_chat(tokenizer)


def count_prompt_tokens(tokenizer, prompt: str, add_special_tokens: bool = False) -> int:
    """Tokens the model reads for a rendered prompt (chat prompts: ``add_special_tokens=False``)."""
    return count_prompt_tokens_many(tokenizer, [prompt], add_special_tokens)[0]


def count_prompt_tokens_many(tokenizer, prompts: Sequence[str], add_special_tokens: bool = False) -> list[int]:
    """``count_prompt_tokens`` of each prompt, in one batch call (each prompt encoded on its own, unpadded)."""
    return encoded_lengths(tokenizer, prompts, add_special_tokens)
