"""Chat language models for summary trees: a local Hugging Face model, a GGUF through llama.cpp or an
OpenAI-compatible server."""

from harness.lm.base import CachedChatLM, ChatLM, build_chat_lm
from harness.lm.llama_cpp import LlamaCppChatLM
from harness.lm.local import LocalChatLM
from harness.lm.openai_compat import ChatCompletionError, OpenAIChatLM

__all__ = [
    "CachedChatLM",
    "ChatCompletionError",
    "ChatLM",
    "LlamaCppChatLM",
    "LocalChatLM",
    "OpenAIChatLM",
    "build_chat_lm",
]
