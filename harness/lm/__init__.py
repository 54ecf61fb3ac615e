"""Chat language models for summary trees: a local Hugging Face model or an OpenAI-compatible server."""

from harness.lm.base import CachedChatLM, ChatLM, build_chat_lm
from harness.lm.local import LocalChatLM
from harness.lm.openai_compat import ChatCompletionError, OpenAIChatLM

__all__ = ["CachedChatLM", "ChatCompletionError", "ChatLM", "LocalChatLM", "OpenAIChatLM", "build_chat_lm"]
