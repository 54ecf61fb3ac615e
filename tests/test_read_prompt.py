"""Prompt rendering with the offline reader's real tokenizer (no weights are loaded)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from harness.backends.loading import load_tokenizer
from harness.backends.offline_models import ensure_offline_model
from harness.read.prompt import PromptTemplate, add_special_tokens_for, count_prompt_tokens

# The folder the default reader config uses, so tests and runs share one conversion.
MODEL_FOLDER = Path(__file__).resolve().parents[1] / ".cache/models/SmolLM2-135M-Instruct"


@pytest.fixture(scope="session")
def smollm2_folder() -> Path:
    return ensure_offline_model("smollm2", MODEL_FOLDER)


@pytest.fixture(scope="module")
def tokenizer(smollm2_folder):
    return load_tokenizer(str(smollm2_folder))


def test_tokenizer_is_left_padded_with_a_pad_token(tokenizer):
    assert tokenizer.padding_side == "left"
    assert tokenizer.pad_token == "<|im_end|>" == tokenizer.eos_token


def test_render_applies_the_chat_template(tokenizer):
    template = PromptTemplate(instruction="Answer briefly.", context_header="Context:", question_header="Question:")
    prompt = template.render(tokenizer, "Who wrote Hamlet?", "Hamlet is a play by William Shakespeare.")
    user = "Answer briefly.\n\nContext:\nHamlet is a play by William Shakespeare.\n\nQuestion: Who wrote Hamlet?"
    # SmolLM2's template adds its own default system turn when the messages have none.
    expected = (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert prompt == expected
    assert "Answer:" not in prompt  # the assistant turn opens the answer in chat prompts
    assert add_special_tokens_for(template, tokenizer) is False


def test_system_text_replaces_the_default_system_turn(tokenizer):
    template = PromptTemplate(system="You answer in a few words.")
    prompt = template.render(tokenizer, "Q?", "C.")
    assert prompt.startswith("<|im_start|>system\nYou answer in a few words.<|im_end|>\n<|im_start|>user\n")
    assert "SmolLM" not in prompt


def test_empty_context_leaves_out_the_context_block():
    template = PromptTemplate(instruction="Answer.", context_header="Context:", question_header="Question:")
    assert template.build_messages("Q?", "  ") == [{"role": "user", "content": "Answer.\n\nQuestion: Q?"}]


def test_plain_text_prompt_without_a_chat_template(tokenizer):
    plain = copy.deepcopy(tokenizer)
    plain.chat_template = None
    template = PromptTemplate(instruction="Answer.", answer_prefix="Answer:")
    prompt = template.render(plain, "Who?", "Ann did.")
    assert prompt == "Answer.\n\nContext:\nAnn did.\n\nQuestion: Who?\nAnswer:"
    assert add_special_tokens_for(template, plain) is True
    # A template may also opt out of the chat template explicitly.
    assert PromptTemplate(use_chat_template=False).render(tokenizer, "Who?", "Ann did.").endswith("\nAnswer:")


def test_count_prompt_tokens_counts_the_special_tokens_of_the_template(tokenizer):
    template = PromptTemplate()
    prompt = template.render(tokenizer, "Who wrote Hamlet?", "Hamlet is a play by William Shakespeare.")
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert count_prompt_tokens(tokenizer, prompt) == len(ids)
    # <|im_start|> (id 1) and <|im_end|> (id 2) are single tokens: three turns open and two close.
    assert ids.count(1) == 3 and ids.count(2) == 2
