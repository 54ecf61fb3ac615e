"""One ModelSpec behind the reader and the tree's local LM, and one ResponseCache behind every generator.

No weights are loaded: generation is replaced by counting functions, and the keys are checked against the
formulas each owner has always used, so caches written before the shared wrapper stay valid."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from harness.backends.loading import ModelSpec
from harness.backends.response_cache import ResponseCache
from harness.cache import TextStore, stable_hash
from harness.cache.fingerprint import code_fingerprint
from harness.lm.base import CachedChatLM
from harness.lm.local import LocalChatLM
from harness.read.base import PromptRequest
from harness.read.hf import TransformersReader
from harness.read.server import ServerReader
from tests.conftest import REPO, compose_cfg

MODEL_KEYS = set(ModelSpec.keys())
MODELS_DIR = REPO / ".cache/models"


# ---- the shared model spec ------------------------------------------------------------------------------


@pytest.mark.parametrize("reader, lm", [("smollm2_135m", "local_smollm2"), ("qwen2.5_7b", "deepseek_v2_lite")])
def test_reader_and_tree_lm_read_the_same_model_keys_into_one_spec(reader, lm):
    cfg = compose_cfg([f"reader={reader}", "tree=dtcrs", f"lm@tree.lm={lm}"])
    for node in (cfg.reader, cfg.tree.lm):
        assert {"pretrained", "dtype", "quantization", "device_map", "trust_remote_code"} <= set(node)
    built_reader, built_lm = instantiate(cfg.reader), instantiate(cfg.tree.lm)  # weights load lazily
    assert isinstance(built_reader, TransformersReader) and isinstance(built_lm, LocalChatLM)
    for built, node, defaults in (
        (built_reader, cfg.reader, {}),
        (built_lm, cfg.tree.lm, {"offline_model": "smollm2"}),
    ):
        assert built.spec == ModelSpec.from_config({k: v for k, v in node.items() if k in MODEL_KEYS}, **defaults)
    # The same keys with the same values make the same spec, whichever component reads them.
    same = {k: v for k, v in cfg.reader.items() if k in MODEL_KEYS}
    assert TransformersReader(name="r", **same).spec == LocalChatLM(**{"offline_model": None, **same}).spec


def test_the_spec_keeps_both_model_ids_as_they_were():
    reader = TransformersReader(name="r", offline_model="smollm2", pretrained="/somewhere/SmolLM2", dtype="float32")
    assert reader.reader_id.startswith("offline:smollm2|dtype=float32|quant=none|")
    assert TransformersReader(name="r", pretrained="org/model", dtype="bf16", batch_size=1).model_id == "org/model"
    lm = LocalChatLM(pretrained="/somewhere/SmolLM2", dtype="float32", max_input_tokens=64)
    assert lm.model_id == "offline:smollm2|dtype=float32|quant=None|max_in=64"  # offline_model defaults to smollm2
    hub = LocalChatLM(pretrained="org/chat", offline_model=None, trust_remote_code=True)
    assert hub.model_id == "org/chat|dtype=bfloat16|quant=None|max_in=None" and hub.spec.trust_remote_code


@pytest.mark.parametrize(
    "make", [lambda **kw: TransformersReader(name="r", **kw), lambda **kw: LocalChatLM(name="r", **kw)]
)
def test_bad_model_settings_are_refused_by_name_for_both(make):
    with pytest.raises(TypeError, match=r"r'?: unknown model settings \['dtpye'\]"):
        make(pretrained="x", dtpye="float32")
    with pytest.raises(ValueError, match="half-ish"):
        make(pretrained="x", dtype="half-ish")
    with pytest.raises(ValueError, match="int4"):
        make(pretrained="x", quantization="int4")
    with pytest.raises(ValueError, match="unknown offline model 'gpt'"):
        make(offline_model="gpt")


def test_placement_follows_quantization():
    assert not ModelSpec(pretrained="x").placed
    assert ModelSpec(pretrained="x", quantization="nf4").placed
    assert ModelSpec(pretrained="x", device_map="auto").placed


# ---- the shared response cache ----------------------------------------------------------------------------


class Counting:
    """A generate-missing function that records what it was asked for."""

    def __init__(self, respond):
        self.respond = respond
        self.asked: list[list[str]] = []

    def __call__(self, prompts, keys):
        self.asked.append(list(prompts))
        return {key: self.respond(prompt) for prompt, key in zip(prompts, keys, strict=False)}


def test_response_cache_generates_each_distinct_prompt_once_and_commits_it(tmp_path):
    def key(prompt):
        return stable_hash("identity", prompt)

    generate = Counting(str.upper)
    cache = ResponseCache(TextStore(tmp_path / "r.sqlite", table="r"))
    assert cache.responses(["a", "b", "a"], key, generate) == (["A", "B", "A"], 2)
    assert generate.asked == [["a", "b"]]
    # A second call, and a second cache over the same file, generate nothing.
    assert cache.responses(["b", "a"], key, generate) == (["B", "A"], 0)
    again = ResponseCache(TextStore(tmp_path / "r.sqlite", table="r"))
    assert again.responses(["a", "c"], key, generate) == (["A", "C"], 1)
    assert generate.asked == [["a", "b"], ["c"]]
    assert TextStore(tmp_path / "r.sqlite", table="r").get_texts([key("a"), key("c")]) == {key("a"): "A", key("c"): "C"}


def test_response_cache_regenerates_unusable_entries_and_leaves_commits_to_a_committing_generator(tmp_path):
    store = TextStore(tmp_path / "r.sqlite", table="r")

    def key(prompt):
        return f"k-{prompt}"

    store.put_texts({"k-old": {"answer": "only an answer"}})
    cache = ResponseCache(store, decode=lambda k, entry: entry.get("raw"))
    generate = Counting(lambda p: f"raw {p}")
    assert cache.responses(["old"], key, generate, commit=False) == (["raw old"], 1)
    assert store.get_texts(["k-old"]) == {"k-old": {"answer": "only an answer"}}  # not written by the wrapper
    cache.put({"k-old": {"raw": "kept"}})
    assert cache.responses(["old"], key, generate) == (["kept"], 0)


def test_memory_layer_answers_without_a_store():
    cache = ResponseCache(None, memory=True)
    generate = Counting(str.upper)
    cache.responses(["x"], str, generate)
    assert cache.responses(["x", "x"], str, generate) == (["X", "X"], 0) and len(generate.asked) == 1


class EchoLM(CachedChatLM):
    backend = "echo"

    def _generate(self, prompts, max_new_tokens):
        return [p[::-1] for p in prompts]


def test_the_three_owners_store_under_their_old_keys(tmp_path):
    request = PromptRequest("where?", "")
    reader = TransformersReader(
        name="r", offline_model="smollm2", models_dir=str(MODELS_DIR), dtype="float32", cache_dir=tmp_path
    )
    prompt = reader.render(request)

    def generate(prompts, keys):  # commits as the predict loop's ResponseCacheWriter does
        new = {k: {"answer": reader.render(r), "raw": reader.render(r)} for r, k in zip(prompts, keys, strict=False)}
        reader.cache.put_texts(new)
        return new

    reader._generate = generate
    reader.answer([request])
    old_key = stable_hash(reader.reader_id, code_fingerprint("read"), prompt)
    assert reader.cache_key(request) == old_key and set(reader.cache.get_texts([old_key])) == {old_key}
    assert reader.generated == 1 and reader.responses([request])[0]["raw"] == prompt and reader.generated == 1

    server = ServerReader(name="s", model="m", offline_model="smollm2", models_dir=MODELS_DIR, cache_dir=tmp_path)
    assert server.render(request) == prompt
    assert server.cache_key(request) == stable_hash(server.reader_id, code_fingerprint("read"), prompt)
    server.response_cache.put({server.cache_key(request): {"answer": "a", "raw": "Oslo"}})
    assert server.responses([request]) == [{"answer": "Oslo", "raw": "Oslo"}] and server.generated == 0
    chat = ServerReader(name="c", model="m", endpoint="chat", offline_model="smollm2", models_dir=MODELS_DIR)
    messages = chat.prompt.build_messages("where?", "")
    assert chat.cache_key(request) == stable_hash(chat.reader_id, code_fingerprint("read"), prompt, messages)

    lm = EchoLM(name="e", model_id="m", system_prompt="Be brief.", cache_dir=tmp_path)
    assert lm.chat([prompt], 7) == [prompt[::-1]]
    old_key = stable_hash("echo", "m", "Be brief.", code_fingerprint("lm"), prompt, 7)
    stored = TextStore(tmp_path / "lm_responses.sqlite", table="lm_responses").get_texts([old_key])
    assert stored == {old_key: prompt[::-1]}
    fresh = EchoLM(name="e", model_id="m", system_prompt="Be brief.", cache_dir=tmp_path)
    assert fresh.chat([prompt, prompt], 7) == [prompt[::-1]] * 2 and fresh.calls == 0 and fresh.requests == 2
