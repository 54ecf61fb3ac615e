"""The server reader over several servers of one model (``reader.base_urls``): data parallel with failover.

The slow tests start real llama.cpp servers (``python -m harness.backends.llama_server`` serving the packaged
SmolLM2 GGUF, one thread and one decoding slot each, so a prompt decodes the same on every server) and compare
what two servers answer, and what is left when one is killed, with what one server answers alone.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from harness.backends.http import OpenAICompatClient, ServerRequestError, ServerUnavailableError
from harness.backends.server_pool import assign
from harness.read.base import PromptRequest
from harness.run.config_check import problems
from tests.conftest import compose_cfg
from tests.test_read_server import QA, SERVER_SETTINGS, FailingProxy, LlamaServer, ScriptedServer, make_reader

MORE_QA = [
    ("Who wrote Romeo and Juliet?", "Romeo and Juliet is a tragedy written by William Shakespeare."),
    ("What is the boiling point of water?", "At sea level water boils at 100 degrees Celsius."),
    ("Which country has the largest population?", "India has the largest population, ahead of China."),
    ("What is the chemical symbol for gold?", "The chemical symbol for gold is Au, from the Latin aurum."),
    ("Who was the first person on the Moon?", "Neil Armstrong was the first person to walk on the Moon, in 1969."),
    ("What is the tallest mountain?", "Mount Everest, at 8,849 metres, is the tallest mountain above sea level."),
]
PROMPTS = [PromptRequest(q, c) for q, c in QA + MORE_QA]
# Short retries: a killed server refuses connections at once, so these only bound how long its prompts wait.
FAST_RETRIES = {"max_retries": 2, "backoff_s": 0.05}


def free_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def servers_reader(urls, tmp_path=None, **kwargs):
    return make_reader(None, tmp_path, base_urls=urls, **kwargs)


# ------------------------------------------------------------------------------------- without a server


def test_requests_are_dealt_out_in_turn():
    assert assign(7, 3) == [0, 1, 2, 0, 1, 2, 0]
    assert assign(4, 1) == [0, 0, 0, 0]
    assert assign(0, 2) == []
    with pytest.raises(ValueError, match="at least one server"):
        assign(3, 0)


def test_the_identity_names_the_first_server_only():
    a, b, c = (f"http://127.0.0.1:{port}/v1" for port in (9, 10, 11))
    one = make_reader(a)
    p = PromptRequest("p", "")
    for urls in ([a], [a, b], [a, c, b], [a + "/", b]):
        reader = servers_reader(urls)
        assert reader.reader_id == one.reader_id and reader.cache_key(p) == one.cache_key(p)
        assert reader.base_url == a
    # The key of one server is what it always was, so caches written before stay valid.
    assert one.reader_id == f"server:tiny@{a}|endpoint=completions|decode=greedy|max_new_tokens=24"
    assert servers_reader([a, b]).base_urls == [a, b]


def test_base_url_and_base_urls_exclude_each_other():
    url = "http://127.0.0.1:9/v1"
    with pytest.raises(ValueError, match=r"reader\.base_url=.*and reader\.base_urls are both set"):
        make_reader(url, base_urls=[url])
    with pytest.raises(ValueError, match="non-empty list"):
        servers_reader([])
    with pytest.raises(ValueError, match="listed twice"):
        servers_reader([url, url + "/"])
    with pytest.raises(ValueError, match="must start with http"):
        servers_reader([url, "127.0.0.1:10/v1"])


def test_the_config_check_reads_base_urls():
    base = ["reader=openai_compat_servers"]
    assert problems(compose_cfg(base)) == []
    assert problems(compose_cfg([*base, "reader.base_urls=null", "reader.base_url=http://h:1/v1"])) == []
    found = problems(compose_cfg([*base, "reader.base_url=http://h:1/v1"]))
    assert found == [
        "reader.base_url and reader.base_urls are both set; allowed: base_url for one server or base_urls for "
        "several (set reader.base_url=null, or use reader=openai_compat_servers)"
    ]
    found = problems(compose_cfg([*base, "reader.base_urls=[http://h:1/v1,ftp://h:2,http://h:1/v1/]"]))
    assert [line.split(";")[0] for line in found] == [
        "reader.base_urls[1]='ftp://h:2' is not a URL",
        "reader.base_urls[2]='http://h:1/v1' is listed twice",
    ]
    assert problems(compose_cfg([*base, "reader.base_urls=[]"]))[0].startswith("reader.base_urls=[] is not a list")


def test_every_server_down_is_an_error_naming_each(tmp_path):
    urls = [free_url(), free_url()]
    reader = servers_reader(urls, tmp_path, **FAST_RETRIES)
    with pytest.raises(ServerUnavailableError, match="every server is down") as caught:
        reader.answer(PROMPTS[:3])
    message = str(caught.value)
    assert "3 prompts unanswered, 0 answers received" in message
    for url in urls:
        assert f"{url}: reader 'srv': {url}/completions failed after 3 attempts (ConnectError" in message
    assert sorted(reader.http.down) == [0, 1]
    # One server down is the same error: it names the only server.
    single = make_reader(urls[0], tmp_path, **FAST_RETRIES)
    with pytest.raises(ServerUnavailableError, match=f"every server is down .*{urls[0]}: "):
        single.answer(PROMPTS[:1])


def test_only_a_dropped_connection_or_5xx_says_a_server_is_down():
    """A read timeout (a slow prompt, on any server) or a refusal is the request's failure, not the server's."""
    with ScriptedServer(delay=0.5) as slow:
        client = OpenAICompatClient(slow.base_url, timeout_s=0.1, max_retries=1, backoff_s=0.01)
        with pytest.raises(ServerRequestError, match="ReadTimeout") as caught:
            client.post("completions", {"prompt": "p"})
        assert not isinstance(caught.value, ServerUnavailableError)
    with ScriptedServer() as server:
        client = OpenAICompatClient(server.base_url, max_retries=1, backoff_s=0.01)
        with pytest.raises(ServerRequestError, match="HTTP 400") as caught:
            client.post("completions", {"prompt": "refuse"})
        assert not isinstance(caught.value, ServerUnavailableError)
    client = OpenAICompatClient(free_url(), max_retries=1, backoff_s=0.01)
    with pytest.raises(ServerUnavailableError, match="ConnectError"):
        client.post("completions", {"prompt": "p"})


# ----------------------------------------------------------------------------- llama.cpp's servers, really


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama-dp")
    servers = [LlamaServer(folder / f"server{i}.log") for i in range(2)]
    yield servers
    assert [server.stop() for server in servers] == [0, 0]


@pytest.fixture(scope="module")
def one_server_answers(two_servers):
    """Reference: every prompt through the first server alone, one at a time, no cache."""
    reader = make_reader(two_servers[0].url + "/v1", concurrency=1, **SERVER_SETTINGS)
    return reader.responses(PROMPTS)


@pytest.mark.slow
def test_two_servers_answer_as_one_does_and_share_its_cache(two_servers, one_server_answers, tmp_path):
    urls = [server.url + "/v1" for server in two_servers]
    reader = servers_reader(urls, tmp_path, concurrency=2, **SERVER_SETTINGS)
    assert reader.responses(PROMPTS) == one_server_answers
    assert "Paris" in one_server_answers[0]["answer"]
    # Dealt out in turn, half to each; every answer generated once and cached.
    assert [client.http_requests for client in reader.http.clients] == [6, 6]
    assert reader.generated == len(PROMPTS) and reader.http.retries == 0 and not reader.http.down
    assert reader.prompt_token_mismatches == 0
    # A one-server reader at the first URL, over the same cache, finds every answer there.
    alone = make_reader(urls[0], tmp_path, **SERVER_SETTINGS)
    assert alone.responses(PROMPTS) == one_server_answers
    assert alone.generated == 0 and alone.http.http_requests == 0


@pytest.mark.slow
def test_a_killed_server_hands_its_prompts_to_the_others(two_servers, one_server_answers, tmp_path, caplog):
    doomed = LlamaServer(tmp_path / "doomed.log")
    try:
        urls = [two_servers[1].url + "/v1", doomed.url + "/v1"]
        reader = servers_reader(urls, tmp_path, concurrency=1, **SERVER_SETTINGS, **FAST_RETRIES)
        victim = reader.http.clients[1]

        def kill_mid_run():
            deadline = time.monotonic() + 60
            while victim.http_requests < 2 and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(0.05)  # its second prompt is being decoded
            doomed.proc.kill()

        killer = threading.Thread(target=kill_mid_run, daemon=True)
        killer.start()
        with caplog.at_level(logging.WARNING, logger="harness.backends.server_pool"):
            answers = reader.responses(PROMPTS)
        killer.join()
    finally:
        doomed.stop()
    assert answers == one_server_answers  # every prompt answered, as one server answers it
    assert reader.generated == len(PROMPTS) and list(reader.http.down) == [1]
    warnings = [r.getMessage() for r in caplog.records if r.name == "harness.backends.server_pool"]
    assert len(warnings) == 1, warnings
    assert f"server {urls[1]} is down" in warnings[0] and f"move to the servers still up: {urls[0]}" in warnings[0]
    moved = int(warnings[0].split("its ")[1].split()[0])
    assert 1 <= moved <= 5  # killed mid-run: it had answered at most one of its six
    assert reader.http.clients[0].http_requests == 6 + moved
    # Later reads go to the server still up; the answers are in the cache under the one-server key.
    again = make_reader(urls[0], tmp_path, **SERVER_SETTINGS)
    assert again.responses(PROMPTS) == one_server_answers and again.generated == 0


@pytest.mark.slow
def test_a_server_answering_only_503_is_down_and_its_prompts_move(two_servers, one_server_answers, tmp_path, caplog):
    with FailingProxy(two_servers[1].url, refusals=[(503, {})] * 100) as failing:
        urls = [two_servers[0].url + "/v1", failing.base_url]
        reader = servers_reader(urls, tmp_path, concurrency=2, **SERVER_SETTINGS, **FAST_RETRIES)
        with caplog.at_level(logging.WARNING, logger="harness.backends.server_pool"):
            assert reader.responses(PROMPTS) == one_server_answers
    assert list(reader.http.down) == [1] and "HTTP 503" in str(reader.http.down[1])
    # Both requests in flight there ran out of retries: 3 attempts each, then its 6 prompts went to the other.
    assert failing.seen == reader.http.clients[1].http_requests == 6
    assert reader.http.clients[0].http_requests == len(PROMPTS)
    assert any(f"server {failing.base_url} is down" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_a_prompt_too_long_fails_as_on_one_server_and_downs_no_server(two_servers, tmp_path):
    urls = [server.url + "/v1" for server in two_servers]
    reader = servers_reader(urls, tmp_path, concurrency=1, **SERVER_SETTINGS)
    too_long = PromptRequest("What is this?", "word " * 1500)  # over the 1024-token slot
    with pytest.raises(ServerRequestError, match=r"prompt 1 of 3 failed .*HTTP 400.*exceeds the available context"):
        reader.responses([PROMPTS[0], too_long, PROMPTS[1]])
    assert not reader.http.down and reader.http.retries == 0
