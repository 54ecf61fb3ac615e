"""The reader stage: a question and its packed context in, a short answer out (``harness.read.base.Reader``).

Backends, one module each: ``hf.TransformersReader`` (the default), ``llama_cpp.LlamaCppReader``,
``vllm.VllmReader`` (the three run in this process through ``local.LocalReader``'s Lightning predict
path) and ``server.ServerReader`` (an OpenAI-compatible HTTP server).

Nothing heavy is imported here: each backend's module imports its own engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.read.base import PromptRequest, Reader

if TYPE_CHECKING:
    from harness.read.hf import TransformersReader
    from harness.read.llama_cpp import LlamaCppReader
    from harness.read.local import LocalReader
    from harness.read.server import ServerReader
    from harness.read.vllm import VllmReader

_BACKENDS = {
    "LocalReader": "harness.read.local",
    "TransformersReader": "harness.read.hf",
    "LlamaCppReader": "harness.read.llama_cpp",
    "VllmReader": "harness.read.vllm",
    "ServerReader": "harness.read.server",
}

__all__ = [
    "LlamaCppReader",
    "LocalReader",
    "PromptRequest",
    "Reader",
    "ServerReader",
    "TransformersReader",
    "VllmReader",
]


def __getattr__(name: str) -> Any:
    if name in _BACKENDS:
        from importlib import import_module

        return getattr(import_module(_BACKENDS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
