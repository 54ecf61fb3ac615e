"""Chat-LM backends: the response cache, and the OpenAI-compatible client against real local HTTP servers.

The fast tests run a stdlib HTTP server that answers from a script (errors, delays, echoes); the slow
tests serve the offline SmolLM2 through ``POST /v1/chat/completions`` and load it locally.
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler

import pytest

from harness.lm import ChatCompletionError, ChatLM, OpenAIChatLM, build_chat_lm
from harness.lm.base import CachedChatLM
from tests.helpers.local_server import LocalServer


class CountingLM(CachedChatLM):
    backend = "counting"

    def __init__(self, **kwargs):
        super().__init__(name="counting", model_id="m1", **kwargs)
        self.generated: list[list[str]] = []

    def _generate(self, prompts, max_new_tokens):
        self.generated.append(list(prompts))
        return [f"{p[::-1]}:{max_new_tokens}" for p in prompts]


def test_responses_are_cached_by_prompt_and_max_new_tokens():
    lm = CountingLM()
    assert lm.chat(["ab", "cd", "ab"], 5) == ["ba:5", "dc:5", "ba:5"]
    assert lm.generated == [["ab", "cd"]]  # a repeated prompt is generated once
    assert lm.chat(["cd", "ab"], 5) == ["dc:5", "ba:5"]
    assert len(lm.generated) == 1 and (lm.calls, lm.requests) == (2, 5)
    assert lm.chat(["ab"], 6) == ["ba:6"]  # another max_new_tokens is another response
    assert lm.generated[-1] == ["ab"]
    assert lm.chat([], 5) == [] and isinstance(lm, ChatLM)


def test_cache_persists_across_instances_and_separates_system_prompts(tmp_path):
    first = CountingLM(cache_dir=tmp_path)
    first.chat(["hello"], 4)
    second = CountingLM(cache_dir=tmp_path)
    assert second.chat(["hello"], 4) == ["olleh:4"] and second.generated == []
    other_system = CountingLM(cache_dir=tmp_path, system_prompt="Be terse.")
    other_system.chat(["hello"], 4)
    assert other_system.generated == [["hello"]]


def test_chat_rejects_bad_arguments():
    lm = CountingLM()
    with pytest.raises(ValueError, match="max_new_tokens"):
        lm.chat(["a"], 0)
    with pytest.raises(TypeError, match="prompt 1"):
        lm.chat(["a", 3], 4)


def test_build_chat_lm_takes_objects_and_configs():
    lm = CountingLM()
    assert build_chat_lm(lm) is lm
    built = build_chat_lm({"_target_": "harness.lm.openai_compat.OpenAIChatLM", "model": "m", "api_key_env": None})
    assert isinstance(built, OpenAIChatLM) and built.model == "m"
    with pytest.raises(ValueError, match="_target_"):
        build_chat_lm({"model": "m"})
    with pytest.raises(TypeError):
        build_chat_lm(42)


# ----------------------------------------------------------------------------- a scripted local server


class ScriptedServer(LocalServer):
    """``POST /v1/chat/completions``: plays ``script`` entries (status, headers, body, delay) first, then
    echoes the last user message. Records every request it received."""

    def __init__(self, script=None, generate=None):
        self.script = list(script or [])
        self.generate = generate
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body, "time": time.monotonic()}
                )
                if self.path != "/v1/chat/completions":
                    return self._send(404, {}, {"error": "not found"})
                if outer.script:
                    status, headers, payload, delay = outer.script.pop(0)
                    time.sleep(delay)
                    if status is not None:
                        return self._send(status, headers, payload)
                user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
                text = outer.generate(body) if outer.generate else f"echo:{user}|max={body['max_tokens']}"
                self._send(200, {}, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})

            def _send(self, status, headers, payload):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self.serve(Handler)


def client(server, **kwargs):
    sleeps: list[float] = []
    kwargs.setdefault("api_key_env", None)
    kwargs.setdefault("sleep", lambda s: sleeps.append(s))
    lm = OpenAIChatLM(model="tiny", base_url=server.base_url, backoff_s=0.5, **kwargs)
    return lm, sleeps


def test_client_sends_openai_chat_payload_with_system_prompt_and_key(monkeypatch):
    monkeypatch.setenv("TEST_LM_KEY", "sk-test")
    with ScriptedServer() as server:
        lm, _ = client(server, api_key_env="TEST_LM_KEY", system_prompt="Be brief.", temperature=0.3)
        assert lm.chat(["What is 2+2?"], 7) == ["echo:What is 2+2?|max=7"]
        request = server.requests[0]
        assert request["path"] == "/v1/chat/completions"
        assert request["headers"]["Authorization"] == "Bearer sk-test"
        assert request["body"] == {
            "model": "tiny",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}],
            "max_tokens": 7,
            "temperature": 0.3,
        }
        # Cached: asking again sends nothing.
        assert lm.chat(["What is 2+2?"], 7) == ["echo:What is 2+2?|max=7"]
        assert len(server.requests) == 1


def test_client_counts_the_prompt_tokens_the_server_reports():
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "four"}}]}
    script = [(200, {}, {**reply, "usage": {"prompt_tokens": 17, "completion_tokens": 1}}, 0), (200, {}, reply, 0)]
    with ScriptedServer(script) as server:
        lm, _ = client(server)
        assert lm.chat(["What is 2+2?"], 4) == ["four"]
        assert (lm.calls, lm.prompt_tokens) == (1, 17)
        # A response without usage counts nothing; a cached prompt is not sent again.
        assert lm.chat(["What is 3+1?", "What is 2+2?"], 4) == ["four", "four"]
        assert (lm.calls, lm.prompt_tokens, len(server.requests)) == (2, 17, 2)


def test_client_retries_429_and_5xx_with_backoff_and_retry_after():
    script = [
        (429, {"Retry-After": "0"}, {"error": "rate"}, 0),
        (503, {}, {"error": "busy"}, 0),
        (500, {}, {"error": "oops"}, 0),
    ]
    with ScriptedServer(script) as server:
        lm, sleeps = client(server)
        assert lm.chat(["hi"], 3) == ["echo:hi|max=3"]
        assert len(server.requests) == 4 and lm.retries == 3
        # Retry-After wins over backoff; then exponential backoff: 0.5 * 2**1, 0.5 * 2**2.
        assert sleeps == [0.0, 1.0, 2.0]


def test_client_gives_up_after_max_retries_and_on_client_errors():
    with ScriptedServer([(503, {}, {"error": "busy"}, 0)] * 5) as server:
        lm, sleeps = client(server, max_retries=2)
        with pytest.raises(ChatCompletionError, match="failed after 3 attempts.*503"):
            lm.chat(["hi"], 3)
        assert len(server.requests) == 3 and sleeps == [0.5, 1.0]
    with ScriptedServer([(400, {}, {"error": "bad model"}, 0)]) as server:
        lm, _ = client(server)
        with pytest.raises(ChatCompletionError, match="refused the request.*400.*bad model"):
            lm.chat(["hi"], 3)
        assert len(server.requests) == 1


def test_client_retries_a_timeout():
    with ScriptedServer([(None, {}, {}, 1.0)]) as server:  # first answer arrives after the timeout
        lm, sleeps = client(server, timeout_s=0.3)
        assert lm.chat(["slow"], 2) == ["echo:slow|max=2"]
        assert lm.retries == 1 and len(sleeps) == 1


def test_client_rate_limit_spaces_requests():
    slept: list[float] = []

    def sleep(seconds):
        slept.append(seconds)
        time.sleep(seconds)

    with ScriptedServer() as server:
        lm, _ = client(server, min_interval_s=0.25, sleep=sleep)
        start = time.monotonic()
        lm.chat(["a", "b", "c"], 2)
        elapsed = time.monotonic() - start
        assert len(server.requests) == 3
        # No wait before the first request; the next two wait out what is left of 0.25 s.
        assert len(slept) == 2 and all(0 < s <= 0.25 for s in slept)
        assert elapsed >= 0.5 - 0.01


def test_client_reports_missing_key_and_malformed_responses(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with ScriptedServer([(200, {}, b"not json", 0), (200, {}, {"choices": []}, 0)]) as server:
        lm, _ = client(server, api_key_env="NO_SUCH_KEY_VAR")
        with pytest.raises(ChatCompletionError, match="NO_SUCH_KEY_VAR"):
            lm.chat(["hi"], 2)
        lm, _ = client(server)
        with pytest.raises(ChatCompletionError, match="malformed"):
            lm.chat(["hi"], 2)
        with pytest.raises(ChatCompletionError, match="malformed"):
            lm.chat(["hi again"], 2)


def test_client_validates_settings():
    with pytest.raises(ValueError, match="timeout_s"):
        OpenAIChatLM(timeout_s=0)
    with pytest.raises(ValueError, match="min_interval_s"):
        OpenAIChatLM(min_interval_s=-1)


# ------------------------------------------------------------------------------ the real offline model


@pytest.fixture(scope="module")
def smollm2_folder():
    from harness.backends.offline_models import default_folder, ensure_offline_model

    return ensure_offline_model("smollm2", default_folder("smollm2"))


@pytest.mark.slow
def test_local_chat_lm_generates_greedily_batches_and_caches(smollm2_folder, tmp_path):
    from harness.lm.local import LocalChatLM

    lm = LocalChatLM(
        pretrained=str(smollm2_folder),
        offline_model="smollm2",
        dtype="float32",
        batch_size=2,
        cache_dir=tmp_path,
        torch_threads=1,
    )
    prompts = ["What is the capital of France?", "Name a colour of the sky in one word."]
    batched = lm.chat(prompts, 12)
    assert all(isinstance(a, str) and a for a in batched)
    assert "Paris" in batched[0]
    # Left padding: answers in a batch equal answers alone.
    alone = LocalChatLM(
        pretrained=str(smollm2_folder), offline_model="smollm2", dtype="float32", batch_size=1, torch_threads=1
    )
    assert [alone.chat([p], 12)[0] for p in prompts] == batched
    # Prompt tokens: each rendered prompt's ids, worked out from the tokenizer (padding not counted).
    tok = lm.tokenizer
    rendered = [
        tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in prompts
    ]
    lengths = [len(tok(r, add_special_tokens=False)["input_ids"]) for r in rendered]
    assert lengths[0] != lengths[1] and (lm.calls, lm.prompt_tokens) == (2, sum(lengths))
    calls = lm.calls
    again = LocalChatLM(pretrained=str(smollm2_folder), offline_model="smollm2", dtype="float32", cache_dir=tmp_path)
    assert again.chat(prompts, 12) == batched and again.calls == 0 and again._model is None
    assert lm.calls == calls


@pytest.mark.slow
def test_openai_client_against_a_local_server_running_smollm2(smollm2_folder):
    """A real OpenAI-compatible endpoint: SmolLM2 via transformers behind POST /v1/chat/completions,
    refusing the first request with 429 so the client's retry path runs."""
    from harness.lm.local import LocalChatLM

    model = LocalChatLM(pretrained=str(smollm2_folder), offline_model="smollm2", dtype="float32", torch_threads=1)

    def generate(body):
        user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
        model.system_prompt = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        return model._generate([user], int(body["max_tokens"]))[0]

    with ScriptedServer([(429, {"Retry-After": "0"}, {"error": "slow down"}, 0)], generate=generate) as server:
        lm = OpenAIChatLM(model="smollm2-135m", base_url=server.base_url, api_key_env=None, sleep=time.sleep)
        answer = lm.chat(["What is the capital of France?"], 12)[0]
        assert "Paris" in answer
        assert lm.retries == 1 and len(server.requests) == 2
    # The server ran the same greedy model: the client's answer is the local model's.
    model.system_prompt = ""
    assert answer == model.chat(["What is the capital of France?"], 12)[0]


def test_client_keeps_responses_received_before_a_failure(tmp_path):
    script = [(None, {}, {}, 0), (400, {}, {"error": "too long"}, 0)]
    with ScriptedServer(script) as server:
        lm, _ = client(server, cache_dir=tmp_path)
        with pytest.raises(ChatCompletionError):
            lm.chat(["first", "second"], 3)
        again, _ = client(server, cache_dir=tmp_path)
        assert again.chat(["first"], 3) == ["echo:first|max=3"]
        assert len(server.requests) == 2  # "first" came from the cache
