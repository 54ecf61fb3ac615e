"""The vLLM reader backend: settings and identity, then the real CPU engine (the venv `make vllm-venv` builds)
against the transformers backend on HotpotQA prompts, the response cache, and a stop within five seconds.

The engine tests never skip: without vLLM's venv they fail, saying how to build it."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from harness.backends import vllm_engine
from harness.backends.vllm_engine import (
    DEFAULT_VENV_PYTHON,
    VllmGenerator,
    VllmSettings,
    VllmUnavailableError,
    _dealt_back,
    _shares,
    batch_invariant_mode,
    model_files_digest,
    vllm_python,
)
from harness.core.devices import CudaProbe, Gpu
from harness.read.base import PromptRequest, Response
from harness.read.hf import TransformersReader
from harness.read.local import LocalReader, threads_field
from harness.read.vllm import VllmReader
from tests.conftest import REPO
from tests.helpers.frozen_code import freeze, popen
from tests.helpers.hotpot import hotpot_prompts

# Every test here may ask vLLM's venv for its build (a subprocess, once per test process): none is in the quick loop.
pytestmark = pytest.mark.process

MODELS = REPO / ".cache" / "models"
SMOLLM2 = MODELS / "SmolLM2-135M-Instruct"


def smollm2(
    backend: str, cache_dir: Path | None = None, dtype: str = "float32", max_new_tokens: int = 16, **vllm
) -> LocalReader:
    settings = {"vllm": {"enforce_eager": True, **vllm}} if backend == "vllm" else {"torch_threads": 2}
    cls = VllmReader if backend == "vllm" else TransformersReader
    return cls(
        name=f"smollm2-{backend}",
        offline_model="smollm2",
        pretrained=str(SMOLLM2),
        models_dir=str(MODELS),
        dtype=dtype,
        batch_size=20,
        max_new_tokens=max_new_tokens,
        cache_dir=cache_dir,
        show_progress=False,
        **settings,
    )


# ---- settings, identity, sizing (no engine) ----------------------------------------------------------


def test_settings_are_validated_by_name():
    with pytest.raises(ValueError, match=r"unknown vllm settings \['tensor_parallel'\]"):
        VllmSettings.from_mapping({"tensor_parallel": 2})
    with pytest.raises(ValueError, match="vllm.tensor_parallel_size must be a positive integer"):
        VllmSettings.from_mapping({"tensor_parallel_size": 0})
    with pytest.raises(ValueError, match="vllm.enable_prefix_caching must be true or false"):
        VllmSettings.from_mapping({"enable_prefix_caching": "yes"})
    assert VllmSettings.from_mapping({"max_model_len": None}).max_model_len is None


def test_identity_holds_what_changes_an_answer():
    assert VllmSettings().identity() == "quant=none|tp=1|prefix_cache"
    assert VllmSettings(tensor_parallel_size=2, quantization="awq", enable_prefix_caching=False).identity() == (
        "quant=awq|tp=2"
    )
    # Data parallelism runs more replicas of the same engine: not part of the identity.
    assert VllmSettings(data_parallel_size=4).identity() == VllmSettings().identity()
    # One sequence at a time, prefixes are never reused, whatever the setting says.
    assert VllmSettings().identity(one_at_a_time=True) == "quant=none|tp=1|seqs=1"


def test_reduced_precision_on_a_cpu_names_the_engines_thread_count():
    def engine(dtype, threads):
        return VllmReader(name="q", offline_model="smollm2", dtype=dtype, vllm={"cpu_threads": threads})

    one, two = engine("bfloat16", 1), engine("bfloat16", 2)
    assert (one.keyed_threads, two.keyed_threads, threads_field(one.keyed_threads)) == (1, 2, "|threads=1")
    assert one.numerics_label.startswith("vllm/hf/bfloat16/cpu-") and one.numerics_label.endswith("-1threads")
    assert engine("float32", 2).keyed_threads is None and "threads" not in engine("float32", 2).numerics_label


def test_on_a_cpu_the_engine_reads_one_sequence_at_a_time_without_prefix_reuse():
    cpu = VllmGenerator("m", None, 24, "bfloat16")._engine_args()
    assert cpu["max_num_seqs"] == 1 and cpu["enable_prefix_caching"] is False
    assert VllmGenerator("m", None, 24, "float32")._engine_args()["max_num_seqs"] == 1  # float32 too
    gpu = VllmGenerator("m", None, 24, "bfloat16", cuda_devices=1, batch_invariant=True)._engine_args()
    assert "max_num_seqs" not in gpu and gpu["enable_prefix_caching"] is True
    # On a GPU without vLLM's batch-invariant kernels, continuous batching would change answers too.
    plain = VllmGenerator("m", None, 24, "bfloat16", cuda_devices=1)._engine_args()
    assert plain["max_num_seqs"] == 1 and plain["enable_prefix_caching"] is False


def test_on_a_cpu_the_engine_runs_inside_its_worker_and_a_gpu_engine_keeps_vllms_processes():
    cpu = VllmGenerator("m", None, 24, "float32")
    assert cpu._engine_args()["distributed_executor_backend"] == "uni"
    assert cpu._environments()[0]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    for gpu in (
        VllmGenerator("m", None, 24, "bfloat16", cuda_devices=1),
        VllmGenerator("m", None, 24, "bfloat16", VllmSettings(tensor_parallel_size=2), cuda_devices=2),
    ):
        assert "distributed_executor_backend" not in gpu._engine_args()
        assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in gpu._environments()[0]


def test_batch_invariant_mode_is_on_where_vllm_documents_it_and_refused_elsewhere():
    assert batch_invariant_mode(None, [(9, 0)]) and batch_invariant_mode(None, [(8, 0), (8, 6)])
    assert not batch_invariant_mode(None, []) and not batch_invariant_mode(None, [(8, 0), (7, 5)])
    assert not batch_invariant_mode(False, [(9, 0)])
    with pytest.raises(ValueError, match=r"^reader.vllm.batch_invariant=true: .* not on the CPU build"):
        batch_invariant_mode(True, [])
    with pytest.raises(ValueError, match=r"not on GPUs of compute capability \['7.5'\]"):
        batch_invariant_mode(True, [(7, 5)])


@pytest.mark.parametrize(
    ("capability", "setting", "invariant"),
    [((9, 0), None, True), ((8, 0), None, True), ((7, 5), None, False), ((9, 0), False, False)],
)
def test_in_a_gpu_nodes_environment_the_id_and_the_workers_say_which_mode(capability, setting, invariant):
    reader = VllmReader(
        name="q", offline_model="smollm2", pretrained=str(SMOLLM2), models_dir=str(MODELS),
        trainer={"accelerator": "gpu"}, vllm={"batch_invariant": setting},
    )  # fmt: skip
    reader.devices.probe = CudaProbe("2.13.0+cu128", "12.8", None, (Gpu(0, "GPU", 80 << 30, capability),))
    identity = reader.reader_id
    assert ("|batch_invariant" in identity, "|seqs=1" in identity) == (invariant, not invariant)
    assert identity.endswith(f"|device=cuda-sm{capability[0]}{capability[1]}")
    generator = VllmGenerator("m", None, 24, "bfloat16", reader.vllm, cuda_devices=1, batch_invariant=invariant)
    assert all(env["VLLM_BATCH_INVARIANT"] == ("1" if invariant else "0") for env in generator._environments())
    assert ("max_num_seqs" in generator._engine_args()) is not invariant


def test_a_cpu_reader_reads_one_at_a_time_and_refuses_the_batch_invariant_mode(monkeypatch):
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "1")  # inherited from a shell: not what the id promises
    reader = smollm2("vllm")
    assert "|seqs=1" in reader.reader_id and "batch_invariant" not in reader.reader_id
    assert VllmGenerator("m", None, 24, "bfloat16")._environments()[0]["VLLM_BATCH_INVARIANT"] == "0"
    with pytest.raises(ValueError, match="reader.vllm.batch_invariant=true"):
        smollm2("vllm", batch_invariant=True).reader_id  # noqa: B018


def test_reader_refuses_transformers_only_settings():
    base = {"name": "r", "pretrained": str(SMOLLM2)}
    with pytest.raises(ValueError, match="decodes greedily"):
        VllmReader(**base, num_beams=2)
    with pytest.raises(ValueError, match=r"reader.vllm.quantization"):
        VllmReader(**base, quantization="nf4")
    with pytest.raises(ValueError, match="tensor_parallel_size or reader.vllm.data_parallel_size"):
        VllmReader(**base, trainer={"devices": 2})
    with pytest.raises(ValueError, match="unknown vllm settings"):
        VllmReader(**base, vllm={"nope": 1})


def test_max_model_len_is_sized_from_the_prompts_and_grows_only_when_needed():
    generator = VllmGenerator("m", tokenizer=None, max_new_tokens=24, dtype="float32")
    generator.reserve(100)
    assert generator.max_model_len == 512  # 124 rounded up to a power of two, at least 512
    generator.reserve(600)
    assert generator.max_model_len == 1024  # 624 -> 1024
    generator.reserve(300)
    assert generator.max_model_len == 1024  # never shrinks
    fixed = VllmGenerator("m", None, 24, "float32", VllmSettings(max_model_len=256))
    fixed.reserve(5000)
    assert fixed.max_model_len == 256  # a set value is a limit; encode() refuses longer prompts


def test_replicas_get_their_own_devices_and_cores(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3})
    settings = VllmSettings(tensor_parallel_size=2, data_parallel_size=2, cpu_threads=4)
    environments = VllmGenerator("m", None, 24, "float32", settings)._environments()
    assert [e["CUDA_VISIBLE_DEVICES"] for e in environments] == ["4,5", "6,7"]
    assert [e["VLLM_CPU_OMP_THREADS_BIND"] for e in environments] == ["0,1", "2,3"]
    # Engine arguments never carry the replica count: each worker is a whole engine.
    assert "data_parallel_size" not in VllmGenerator("m", None, 24, "float32", settings)._engine_args()


def test_prompts_are_dealt_to_replicas_in_turn_and_put_back_in_order():
    # Prompts arrive sorted by length: dealt in turn, every replica gets short and long ones alike.
    assert _shares(list(range(7)), 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert _shares([1], 2) == [[1], []]
    for count in range(0, 12):
        for parts in (1, 2, 3, 5):
            items = list(range(count))
            assert _dealt_back(_shares(items, parts)) == items
            assert _dealt_back([s for s in _shares(items, parts) if s]) == items  # empty shares send nothing


def test_model_files_digest_follows_the_files(tmp_path):
    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1000)
    first = model_files_digest(tmp_path)
    assert first == model_files_digest(tmp_path)
    (tmp_path / "config.json").write_text('{"a": 2}')
    assert model_files_digest(tmp_path) != first
    assert model_files_digest("Qwen/Qwen2.5-7B-Instruct") == "hub"  # not a folder: vLLM resolves the hub id


def test_a_missing_interpreter_is_named(tmp_path, monkeypatch):
    with pytest.raises(VllmUnavailableError, match="reader.vllm.python=/no/python: no such interpreter"):
        vllm_python("/no/python")
    monkeypatch.setenv("HARNESS_VLLM_PYTHON", str(tmp_path / "python"))
    with pytest.raises(VllmUnavailableError, match="HARNESS_VLLM_PYTHON"):
        vllm_python()


# ---- the real engine (vLLM's CPU build) --------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_venv() -> str:
    if not DEFAULT_VENV_PYTHON.is_file():
        pytest.fail(f"{DEFAULT_VENV_PYTHON} is missing: `make vllm-venv` builds vLLM's CPU venv (make test does)")
    return str(DEFAULT_VENV_PYTHON)


# Enough prompts to compare the backends; each costs seconds of float32 prefill on a CPU, in both.
PROMPTS = 12


@pytest.fixture(scope="module")
def engine(vllm_venv, tmp_path_factory) -> Iterator[LocalReader]:
    """One vLLM reader for the tests below: its engine starts once, on first use (tens of seconds on a CPU).
    The work is spread over the fixtures so that no one test waits for all of it: the first test starts the
    engine, the next has it answer the prompts, the next reads them with transformers."""
    reader = smollm2("vllm", tmp_path_factory.mktemp("vllm"))
    yield reader
    reader.close()


@dataclass
class EngineAnswers:
    prompts: list[PromptRequest]
    texts: list[str]  # the prompts as rendered for the model
    answers: list[Response]
    prompt_tokens: int  # the tokens the engine read for them


@pytest.fixture(scope="module")
def engine_answers(engine) -> EngineAnswers:
    prompts = hotpot_prompts(PROMPTS)
    generator = engine.module.backend
    before = generator.prompt_tokens
    answers = engine.responses(prompts)
    return EngineAnswers(prompts, [engine.render(p) for p in prompts], answers, generator.prompt_tokens - before)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Iterator[tuple[LocalReader, list[Response]]]:
    """The transformers backend and its answers to the same prompts."""
    reader = smollm2("transformers", tmp_path_factory.mktemp("transformers"))
    yield reader, reader.responses(hotpot_prompts(PROMPTS))
    reader.close()


@pytest.mark.slow
def test_prompts_sent_again_get_the_same_answers_with_no_prefix_reused_on_a_cpu(engine):
    # On a CPU the engine reads one sequence at a time and reuses no prefix (a prefix computed for another
    # prompt would bring its numerics into this one's answer): the same prompts sent again are read afresh.
    # The three longest: the most whole blocks a prefix cache could have reused.
    texts = sorted((engine.render(p) for p in hotpot_prompts(PROMPTS)), key=engine.count_prompt_tokens)[-3:]
    generator = engine.module.backend
    first = generator.generate(texts)  # starts the engine
    assert generator.generate(texts) == first
    assert generator.cached_tokens == 0
    print(f"\nvLLM {generator.version}: engine start {generator.start_seconds:.1f} s")


@pytest.mark.slow
def test_a_rerun_is_served_from_the_response_cache_without_starting_an_engine(engine, engine_answers, monkeypatch):
    def no_engine(*args, **kwargs):
        raise AssertionError("the rerun started a vLLM worker")

    monkeypatch.setattr(vllm_engine, "_Worker", no_engine)  # every engine runs in a worker process
    rerun = smollm2("vllm", engine.cache_dir)
    assert rerun.responses(engine_answers.prompts) == engine_answers.answers
    assert rerun.generated == 0 and rerun._module is None  # every answer from the cache; no engine built


@pytest.mark.slow
def test_vllm_agrees_with_transformers_on_the_same_prompts(engine, engine_answers, reference):
    (transformers, theirs), ours = reference, engine_answers.answers
    assert engine.reader_id.startswith("offline:smollm2|backend=vllm|files=")
    assert "|dtype=float32|quant=none|tp=1|seqs=1|decode=greedy|max_new_tokens=16|vllm=vllm-cpu-" in (engine.reader_id)
    request = PromptRequest("q", "c")
    assert engine.render(request) == transformers.render(request)  # same tokenizer and template

    same_raw = sum(a["raw"] == b["raw"] for a, b in zip(ours, theirs, strict=True))
    same_answer = sum(a["answer"] == b["answer"] for a, b in zip(ours, theirs, strict=True))
    print(
        f"\nvLLM vs transformers, SmolLM2-135M float32, {len(ours)} HotpotQA prompts: "
        f"{same_answer} answers and {same_raw} generations identical"
    )
    for a, b in zip(ours, theirs, strict=True):
        if a["answer"] != b["answer"]:
            print(f"  vllm {a['answer']!r} | transformers {b['answer']!r}")
    # Greedy decoding of the same float32 weights: the two kernels' sums differ in the last bits, which
    # can flip a near-tie, so most (not necessarily all) generations are identical.
    assert same_answer >= 0.8 * len(ours)
    # vLLM read exactly the tokens the harness counted.
    assert engine.generated == len(ours)
    assert engine_answers.prompt_tokens == sum(engine.count_prompt_tokens_many(engine_answers.texts))


@pytest.mark.slow
def test_a_reader_replaced_in_a_sweep_process_stops_its_engine(engine, engine_answers, tmp_path):
    from harness.run.reuse import shared_instance

    # A sweep's first job read with the module's engine, which has answered (engine_answers).
    first = shared_instance("reader", {"job": 1}, lambda: engine)
    (worker,) = first.module.backend._workers
    pid = worker.process.pid
    assert psutil.pid_exists(pid)
    # The next job of the sweep reads with another reader: the engine (and on a GPU its memory) goes first.
    shared_instance("reader", {"job": 2}, lambda: smollm2("transformers", tmp_path / "second"))
    assert worker.process.poll() is not None and not psutil.pid_exists(pid)
    assert first._module is None
    assert not worker.log_path.exists()  # a worker that ended cleanly leaves no log behind


@pytest.mark.slow
def test_two_replicas_give_the_single_engines_answers_in_order(engine, engine_answers, tmp_path):
    # Its answers are in hand: the single engine is stopped at once (if the test above has not stopped it),
    # so the replicas get the cores.
    if engine._module is not None:
        (worker,) = engine.module.backend._workers
        engine.module.backend.close(kill=True)
        worker.log_path.unlink()
    # Two replicas share the prompts (dealt in turn: two to one, one to the other) and give the single engine's
    # answers, in order. They share this worker's core, as replicas do when a job has fewer cores than replicas:
    # on both of the suite's cores (every_core) the second replica competed with the other worker's tests, and
    # the test took 37.7 to 64.5 s; on one core of its own, 26 to 42 s.
    replicas = smollm2("vllm", tmp_path / "replicas", data_parallel_size=2)
    assert replicas.reader_id == engine.reader_id  # replicas change where prompts run, not their answers
    try:
        answers = replicas.responses(engine_answers.prompts[:3])
        assert answers == engine_answers.answers[:3]
        assert len({w.process.pid for w in replicas.module.backend._workers}) == 2
    finally:
        # Killed: the graceful stop is the replaced-reader test's to check, and waiting for two of them adds time.
        logs = [w.log_path for w in replicas.module.backend._workers]
        replicas.module.backend.close(kill=True)
        replicas.close()
    assert all(log.exists() for log in logs)  # a stopped worker's log stays for whoever looks into the stop
    for log in logs:
        log.unlink()


@pytest.mark.slow
def test_sigterm_while_the_engine_works_exits_within_five_seconds_and_leaves_no_process(
    vllm_venv, tmp_path, monkeypatch
):
    code = freeze(tmp_path / "code")
    monkeypatch.setenv("HARNESS_VLLM_PYTHON", vllm_venv)  # the frozen copy has no .venv-vllm beside it
    run_dir = tmp_path / "run"
    args = ["dataset=demo", "reader=smollm2_135m_vllm", "logger=none", f"hydra.run.dir={run_dir}"]
    proc = popen(code, args, tmp_path / "cache")
    deadline = time.time() + 300
    workers: list[psutil.Process] = []
    while not workers:  # the harness has handed the engine its first request
        assert proc.poll() is None, f"ended before the signal (rc {proc.returncode}): {proc.stdout.read()[-3000:]}"
        assert time.time() < deadline, "no vLLM worker in time"
        workers = [p for p in psutil.Process(proc.pid).children() if any("worker.py" in part for part in p.cmdline())]
        time.sleep(0.2)
    time.sleep(3.0)  # the engine is starting (tens of seconds on a CPU): a request is in flight
    engine = [workers[0], *workers[0].children(recursive=True)]
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    seconds = time.time() - sent
    assert proc.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert seconds <= 5, f"took {seconds:.1f} s to stop"
    assert not (run_dir / "summary.json").exists()
    gone, alive = psutil.wait_procs(engine, timeout=5)
    assert not alive, f"vLLM processes left running: {[p.pid for p in alive]}"
    # The stopped worker's log stays, named where the run started it.
    (log,) = {Path(name) for name in re.findall(r"\S*vllm-worker-\S+\.log", out)}
    assert log.is_file()
    log.unlink()
