"""Every reader backend is a ``harness.read.base.Reader``: one contract the pipeline calls, whichever runs."""

from __future__ import annotations

import inspect

import harness.read
from harness.read.base import PromptRequest, Reader
from harness.read.local import LocalReader

BACKENDS = {"TransformersReader", "LlamaCppReader", "VllmReader", "ServerReader"}


def reader_classes() -> dict[str, type]:
    return {
        name: cls
        for name in harness.read.__all__
        if inspect.isclass(cls := getattr(harness.read, name)) and name.endswith("Reader")
    }


def test_every_reader_class_is_a_reader_and_gives_responses():
    classes = reader_classes()
    assert set(classes) >= BACKENDS | {"Reader", "LocalReader"}
    for name, cls in classes.items():
        assert issubclass(cls, Reader), name
        assert cls.responses is Reader.responses, name  # one cache path for every backend
        assert callable(cls.render) and callable(cls.count_prompt_tokens_many), name
    for name in BACKENDS:
        assert not inspect.isabstract(classes[name]), name  # each backend implements the whole contract


def test_the_local_backends_share_the_lightning_path_and_the_engines_state_their_limits():
    classes = reader_classes()
    local = {name for name, cls in classes.items() if issubclass(cls, LocalReader) and cls is not LocalReader}
    assert local == {"TransformersReader", "LlamaCppReader", "VllmReader"}
    assert all(classes[name]._generate is LocalReader._generate for name in local)
    assert classes["TransformersReader"].engine_quantization is None
    assert all(
        classes[name].engine_quantization and classes[name].engine_devices for name in local - {"TransformersReader"}
    )


def test_a_request_is_a_value():
    request = PromptRequest("Q?", "Context.")
    assert request == PromptRequest("Q?", "Context.") and hash(request) == hash(PromptRequest("Q?", "Context."))
    assert len({request, PromptRequest("Q?", "Context.")}) == 1
