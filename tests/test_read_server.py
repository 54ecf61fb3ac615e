"""The server reader (``reader=openai_compat``).

Fast tests run a stdlib HTTP server that answers ``/v1/completions`` and ``/v1/chat/completions`` from a
script; the slow tests start llama.cpp's own HTTP server (``python -m harness.backends.llama_server``,
serving the packaged SmolLM2 GGUF) as a subprocess, with a small proxy in front of it that counts
requests in flight and fails the first ones with 429/503.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness.backends.http import ServerRequestError
from harness.read.base import PromptRequest
from harness.read.prompt import PromptTemplate
from harness.read.server import ServerReader
from tests.helpers.local_server import LocalServer

REPO = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO / ".cache/models"

QA = [
    ("What is the capital of France?", "France is a country in Europe. Its capital is Paris."),
    ("Who painted the Mona Lisa?", "The Mona Lisa was painted by Leonardo da Vinci in the early 16th century."),
    ("Which planet is known as the Red Planet?", "Mars is called the Red Planet because of iron oxide on its surface."),
    ("What is the largest ocean?", "The Pacific Ocean is the largest and deepest of Earth's oceans."),
    ("What gas do plants absorb?", "Plants absorb carbon dioxide from the air for photosynthesis."),
    ("In which year did the Berlin Wall fall?", "The Berlin Wall fell on 9 November 1989."),
]


def make_reader(base_url, tmp_path=None, **kwargs) -> ServerReader:
    kwargs.setdefault("offline_model", "smollm2")
    kwargs.setdefault("models_dir", MODELS_DIR)
    kwargs.setdefault("backoff_s", 0.01)
    return ServerReader(name="srv", model=kwargs.pop("model", "tiny"), base_url=base_url, cache_dir=tmp_path, **kwargs)


# ----------------------------------------------------------------------------- a scripted local server


def echo(text: str) -> str:
    return f"{len(text)}:" + text[-12:].replace("\n", "/")


class ScriptedServer(LocalServer):
    """Answers completions with ``echo(prompt)`` (chat: ``echo`` of the last user message) after
    ``delay`` seconds; prompts containing ``refuse`` get a 400. Records requests and the
    most requests it held at once."""

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.requests.append({"path": self.path, "body": body})
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                try:
                    time.sleep(outer.delay)
                    if self.path == "/v1/completions":
                        text = body["prompt"]
                        reply = {"choices": [{"text": f"{echo(text)}\nmore"}], "usage": {"prompt_tokens": 3}}
                    elif self.path == "/v1/chat/completions":
                        text = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
                        reply = {"choices": [{"message": {"content": echo(text)}}]}
                    else:
                        return self._send(404, {"error": "not found"})
                    if "refuse" in text:
                        return self._send(400, {"error": "prompt refused"})
                    self._send(200, reply)
                finally:
                    with outer.lock:
                        outer.in_flight -= 1

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.serve(Handler)


def test_completions_send_exactly_the_rendered_prompt_and_cache_the_answers(tmp_path):
    with ScriptedServer() as server:
        reader = make_reader(server.base_url, tmp_path)
        request = PromptRequest("Who wrote Hamlet?", "Hamlet is a play by Shakespeare.")
        prompt = reader.render(request)
        assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n")
        answers = reader.responses([request, request])
        # The answer is the first line of the generation; the whole generation is kept as raw.
        assert answers[0] == {"answer": echo(prompt), "raw": f"{echo(prompt)}\nmore"}
        assert answers[1] == answers[0]
        assert len(server.requests) == 1  # a repeated prompt is sent once
        assert server.requests[0] == {
            "path": "/v1/completions",
            "body": {"model": "tiny", "prompt": prompt, "max_tokens": 24, "temperature": 0.0},
        }
        assert (reader.requested, reader.generated) == (2, 1)
        # The server said 3 prompt tokens; the local tokenizer counts more: the disagreement is counted.
        assert reader.count_prompt_tokens(prompt) > 3 and reader.prompt_token_mismatches == 1
        # A new reader over the same cache sends nothing.
        again = make_reader(server.base_url, tmp_path)
        assert again.answer([request]) == [answers[0]["answer"]]
        assert len(server.requests) == 1 and again.generated == 0 and again.http.http_requests == 0


def test_chat_endpoint_sends_the_messages_and_keys_the_cache_apart(tmp_path):
    with ScriptedServer() as server:
        template = PromptTemplate(system="Be brief.")
        chat = make_reader(server.base_url, tmp_path, endpoint="chat", prompt=template)
        completions = make_reader(server.base_url, tmp_path, prompt=template)
        request = PromptRequest("Q?", "Some context.")
        assert completions.render(request) == chat.render(request)  # one rendering, one count
        user = template.user_text("Q?", "Some context.")
        assert chat.answer([request]) == [echo(user)]
        body = server.requests[0]["body"]
        assert server.requests[0]["path"] == "/v1/chat/completions"
        assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": user}]
        assert chat.cache_key(request) != completions.cache_key(request)
        completions.answer([request])
        assert [r["path"] for r in server.requests] == ["/v1/chat/completions", "/v1/completions"]


def test_a_chat_request_and_its_key_are_a_function_of_the_question_and_context(tmp_path):
    """A chat reader that never rendered a request sends the body (system message included) and keys the
    answer exactly as one that rendered and counted it first: nothing is carried from rendering to sending."""
    template = PromptTemplate(system="Be brief.")
    request = PromptRequest("Who wrote Hamlet?", "Hamlet is a play by Shakespeare.")
    with ScriptedServer() as server:
        rendered = make_reader(server.base_url, tmp_path / "rendered", endpoint="chat", prompt=template)
        rendered.count_prompt_tokens(rendered.render(request))
        fresh = make_reader(server.base_url, tmp_path / "fresh", endpoint="chat", prompt=template)
        assert fresh.payload(request) == rendered.payload(request)
        assert fresh.cache_key(request) == rendered.cache_key(request)
        fresh.answer([request])
        rendered.answer([request])
        first, second = (r["body"] for r in server.requests)
    assert first == second == rendered.payload(request)
    assert first["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": template.user_text(request.question, request.context)},
    ]
    stored = fresh.cache.get_texts([fresh.cache_key(request)])
    assert set(stored) == {rendered.cache_key(request)}


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_rendering_leaves_no_state_on_the_reader(endpoint):
    reader = make_reader("http://127.0.0.1:9/v1", endpoint=endpoint, prompt=PromptTemplate(system="Be brief."))
    assert reader.token_counter is not None  # the tokenizer loads once, whatever is rendered later
    before = {name: repr(value) for name, value in vars(reader).items()}
    for question in ("Q1?", "Q2?"):
        request = PromptRequest(question, "Some context.")
        reader.count_prompt_tokens(reader.render(request))
        reader.payload(request)
        reader.cache_key(request)
    assert {name: repr(value) for name, value in vars(reader).items()} == before


def test_identity_covers_model_endpoint_and_decoding(tmp_path):
    base = make_reader("http://127.0.0.1:9/v1")
    assert base.reader_id == "server:tiny@http://127.0.0.1:9/v1|endpoint=completions|decode=greedy|max_new_tokens=24"
    p = PromptRequest("p", "")
    keys = {base.cache_key(p)}
    for change in (
        {"model": "other"},
        {"endpoint": "chat"},
        {"max_new_tokens": 8},
        {"temperature": 0.7},
        {"stop": ["\n"]},
        {"extra_body": {"top_k": 1}},
        {"base_url": "http://127.0.0.1:10/v1"},
    ):
        kwargs = dict(change)
        reader = make_reader(kwargs.pop("base_url", "http://127.0.0.1:9/v1"), **kwargs)
        keys.add(reader.cache_key(p))
    assert len(keys) == 8
    # Greedy decoding ignores the seed, so it does not split the cache; sampling sends it and keys on it.
    assert make_reader("http://127.0.0.1:9/v1", seed=7).cache_key(p) == base.cache_key(p)
    sampled = make_reader("http://127.0.0.1:9/v1", temperature=0.7, seed=7)
    assert sampled.payload(p)["seed"] == 7 and "seed" not in base.payload(p)
    assert sampled.cache_key(p) != make_reader("http://127.0.0.1:9/v1", temperature=0.7, seed=8).cache_key(p)


def test_requests_run_concurrently_and_answers_stay_aligned(tmp_path):
    prompts = [PromptRequest(f"question number {i:02d}", "") for i in range(8)]
    with ScriptedServer(delay=0.3) as server:
        reader = make_reader(server.base_url, tmp_path, concurrency=4)
        start = time.monotonic()
        answers = reader.answer(prompts)
        elapsed = time.monotonic() - start
    assert answers == [echo(reader.render(p)) for p in prompts]
    assert server.max_in_flight == 4
    assert elapsed < 8 * 0.3  # sequentially it would take 2.4 s; four at a time about 0.6 s


def test_a_failed_prompt_names_itself_and_answers_already_received_stay_cached(tmp_path):
    prompts = [PromptRequest(q, "") for q in ("alpha prompt", "beta prompt", "refuse this one", "gamma prompt")]
    with ScriptedServer() as server:
        reader = make_reader(server.base_url, tmp_path, concurrency=1)
        with pytest.raises(ServerRequestError, match=r"prompt 2 of 4 failed \(2 answers received.*400.*prompt refused"):
            reader.answer(prompts)
        assert len(server.requests) == 3  # the prompt after the failure was never sent
        again = make_reader(server.base_url, tmp_path)
        assert again.answer(prompts[:2]) == [echo(again.render(p)) for p in prompts[:2]]
        assert len(server.requests) == 3


def test_settings_are_validated():
    with pytest.raises(ValueError, match="endpoint"):
        make_reader("http://127.0.0.1:9/v1", endpoint="responses")
    with pytest.raises(ValueError, match="concurrency"):
        make_reader("http://127.0.0.1:9/v1", concurrency=0)
    with pytest.raises(ValueError, match="base_url"):
        make_reader("127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="tokenizer"):
        make_reader("http://127.0.0.1:9/v1", offline_model=None)
    with pytest.raises(ValueError, match="unknown offline model"):
        make_reader("http://127.0.0.1:9/v1", offline_model="nope")


def test_published_config_instantiates(tmp_path):
    cfg = OmegaConf.create(
        {
            "seed": 42,
            "paths": {"cache_dir": str(tmp_path), "models_dir": str(MODELS_DIR)},
            "prompt": OmegaConf.load(REPO / "conf/prompt/default.yaml"),
            "reader": OmegaConf.load(REPO / "conf/reader/openai_compat.yaml"),
        }
    )
    reader = instantiate(cfg.reader)
    assert isinstance(reader, ServerReader)
    assert (reader.endpoint, reader.temperature, reader.concurrency, reader.base_url) == (
        "completions",
        0.0,
        4,
        "http://127.0.0.1:8080/v1",
    )
    assert reader.cache.path == tmp_path / "responses.sqlite" and reader._tokenizer is None
    assert reader.prompt.instruction.startswith("Answer the question using the context.")


# ------------------------------------------------------------------- llama.cpp's server, really serving


class LlamaServer:
    """``python -m harness.backends.llama_server`` on a free port, stopped with SIGTERM."""

    def __init__(self, log_path: Path, parallel: int = 1):
        self.log = open(log_path, "w")  # noqa: SIM115 - outlives __init__; stop() closes it
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.backends.llama_server",
                "--model",
                "smollm2",
                "--port",
                "0",
                "--parallel",
                str(parallel),
                "--threads",
                "1",
                "--ctx-per-slot",
                "1024",
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        line = self._first_line(timeout=120)
        if not line.startswith("listening on http://"):
            self.stop()
            raise RuntimeError(f"llama.cpp server did not start: {line!r}; log: {log_path.read_text()[-2000:]}")
        self.url = line.split()[-1]
        deadline = time.monotonic() + 60
        while httpx.get(f"{self.url}/health").status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("llama.cpp server never became healthy")
            time.sleep(0.2)

    def _first_line(self, timeout: float) -> str:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        return lines[0].strip() if lines else ""

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class FailingProxy(LocalServer):
    """Forwards POSTs to ``upstream``; the first requests get the scripted ``(status, headers)`` refusals.
    Counts requests seen and the most forwarded at once."""

    def __init__(self, upstream: str, refusals=()):
        self.refusals = list(refusals)
        self.seen = 0
        self.refused = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        client = httpx.Client(timeout=300)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with outer.lock:
                    outer.seen += 1
                    refusal = outer.refusals.pop(0) if outer.refusals else None
                    if refusal is None:
                        outer.in_flight += 1
                        outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                    else:
                        outer.refused += 1
                if refusal is not None:
                    status, headers = refusal
                    return self._send(status, headers, b'{"error": "try later"}')
                try:
                    upstream_reply = client.post(
                        upstream + self.path, content=body, headers={"Content-Type": "application/json"}
                    )
                finally:
                    with outer.lock:
                        outer.in_flight -= 1
                self._send(upstream_reply.status_code, {}, upstream_reply.content)

            def _send(self, status, headers, data):
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.serve(Handler)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    # One decoding slot: llama.cpp's continuous batching is not batch-invariant on CPU (the same greedy
    # prompt can decode differently depending on which requests share its batch), so exact agreement
    # between a concurrent and a sequential run needs the server to decode one request at a time.
    server = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log", parallel=1)
    yield server
    assert server.stop() == 0  # SIGTERM shuts the server down cleanly


@pytest.fixture(scope="module")
def sequential_answers(llama_server):
    """Reference: one request at a time, straight to the server, no cache."""
    reader = make_reader(llama_server.url + "/v1", concurrency=1, **SERVER_SETTINGS)
    prompts = [PromptRequest(q, c) for q, c in QA]
    return prompts, reader.responses(prompts), reader


# Prompt caching reuses the previous request's prefix, which changes how the prompt is split into
# batches and so, slightly, the numbers: off, for answers independent of request order.
SERVER_SETTINGS = {"model": "smollm2-135m", "max_new_tokens": 16, "extra_body": {"cache_prompt": False}}


@pytest.mark.slow
def test_llama_cpp_server_concurrent_answers_match_sequential_and_are_cached(
    llama_server, sequential_answers, tmp_path
):
    prompts, reference, sequential = sequential_answers
    assert sequential.http.http_requests == len(QA) and sequential.http.retries == 0
    assert "Paris" in reference[0]["answer"] and "Leonardo" in reference[1]["answer"]
    # llama.cpp tokenizes the prompt exactly as the harness counted it.
    assert sequential.prompt_token_mismatches == 0

    with FailingProxy(llama_server.url) as proxy:
        reader = make_reader(proxy.base_url, tmp_path, concurrency=3, **SERVER_SETTINGS)
        assert reader.responses(prompts) == reference
        assert proxy.max_in_flight >= 2  # requests really were in flight together
        assert reader.generated == len(QA) and reader.prompt_token_mismatches == 0
        sent = proxy.seen
        assert reader.answer(prompts) == [r["answer"] for r in reference]
        fresh = make_reader(proxy.base_url, tmp_path, concurrency=3, **SERVER_SETTINGS)
        assert fresh.answer(list(reversed(prompts))) == [r["answer"] for r in reversed(reference)]
        assert proxy.seen == sent and fresh.http.http_requests == 0  # both answered from the cache


@pytest.mark.slow
def test_llama_cpp_server_behind_429_and_503_is_retried(llama_server, sequential_answers):
    prompts, reference, _ = sequential_answers
    refusals = [(429, {"Retry-After": "0"}), (503, {}), (503, {}), (429, {"Retry-After": "1"})]
    with FailingProxy(llama_server.url, refusals) as proxy:
        reader = make_reader(proxy.base_url, concurrency=2, **SERVER_SETTINGS)
        start = time.monotonic()
        answers = reader.responses(prompts[:3])
        elapsed = time.monotonic() - start
    assert answers == reference[:3]
    assert proxy.refused == 4 and reader.http.retries == 4
    assert proxy.seen == 3 + 4 == reader.http.http_requests
    assert elapsed >= 1.0  # the second 429's Retry-After: 1 was waited out


@pytest.mark.process
def test_llama_server_rejects_a_missing_gguf(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "harness.backends.llama_server", "--model", str(tmp_path / "no.gguf")],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert result.returncode != 0 and "no.gguf does not exist" in result.stderr


def test_a_reused_packing_sends_the_system_message_to_a_new_chat_reader(tmp_path):
    """Jobs of one process that differ only in a generation setting (reader.max_new_tokens) share their
    packings (harness.run.reuse): the second job's reader never rendered those prompts, yet must send the same
    chat messages, system message included, and key its cache by them."""
    from harness.run.pipeline import Pipeline
    from tests.conftest import compose_cfg

    with ScriptedServer() as server:
        sent = {}
        for max_new_tokens in (24, 32):
            cfg = compose_cfg(
                [
                    "dataset=demo",
                    "dataset.sample_size=3",
                    "logger=none",
                    f"paths.cache_dir={tmp_path}",
                    f"paths.models_dir={MODELS_DIR}",
                    "reader=openai_compat",
                    "reader.endpoint=chat",
                    f"reader.base_url={server.base_url}",
                    f"reader.max_new_tokens={max_new_tokens}",
                    "prompt.system=Be brief.",
                ]
            )
            pipeline = Pipeline(cfg)
            prepared = pipeline.prepare(pipeline.load())
            before = len(server.requests)
            pipeline.read(prepared)
            sent[max_new_tokens] = [r["body"] for r in server.requests[before:]]
        assert pipeline.reused["packings"] == 1  # the second job reused the first job's packings
        first, second = (sorted(sent[n], key=lambda body: body["messages"][-1]["content"]) for n in (24, 32))
        assert len(first) == len(second) == 3  # requests run concurrently: compared in a fixed order
        for a, b in zip(first, second, strict=True):
            assert a["messages"][0] == {"role": "system", "content": "Be brief."}
            assert b["messages"] == a["messages"] and b["max_tokens"] == 32
