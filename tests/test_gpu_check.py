"""The GPU check for a lent node (benchmarks/gpu_check.py) and its bundle (benchmarks/gpu_bundle.py), in the CPU
mode ``make test`` runs: 2-layer models built from the packaged Qwen2.5-7B config, the same sections, the same
JSON lines. On a node the same script reads the full models (docs/gpu.md has its figures)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED_DATA

IRCOT = SHARED_DATA / "hotpotqa_ircot" / "hotpotqa_dev_subsampled_485.jsonl"
sys.path.insert(0, str(REPO / "benchmarks"))
from gpu_bundle import build, check_prompts  # noqa: E402


def test_the_prompts_are_each_question_with_its_gold_paragraphs_cut_then_with_all():
    prompts = check_prompts(IRCOT, 4)
    first = json.loads(IRCOT.read_text().splitlines()[0])
    gold = [c for c in first["contexts"] if c["is_supporting"]]
    assert len(prompts) == 8 and prompts[0]["question"] == prompts[4]["question"] == first["question_text"]
    assert prompts[0]["context"] == "\n\n".join(f"{c['title']}: {c['paragraph_text'][:700]}" for c in gold)
    assert prompts[4]["context"].count("\n\n") == len(first["contexts"]) - 1


def test_the_bundle_holds_what_a_node_lacks_within_what_a_call_carries(tmp_path):
    size = build(tmp_path / "bundle.tar.gz", 8, IRCOT)
    assert size <= 64 * 2**20
    with tarfile.open(tmp_path / "bundle.tar.gz") as archive:
        names = set(archive.getnames())
    for needed in ("site/transformers", "site/hydra", "site/omegaconf", "site/antlr4", "site/huggingface_hub"):
        assert needed in names
    assert any(n.startswith("site/transformers-5.") and n.endswith(".dist-info") for n in names)
    assert {"tokenizer/tokenizer.json", "prompts.json"} <= names
    libraries = {n.rsplit("/", 1)[1] for n in names if n.startswith("site/bitsandbytes/libbitsandbytes_")}
    assert libraries == {"libbitsandbytes_cpu.so", "libbitsandbytes_cuda130.so"}


def run_check(tmp_path, sections: str) -> tuple[list[dict], Path]:
    """The check's ``sections`` on the CPU with the tiny random-weight model: its rows and its output folder."""
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps(check_prompts(IRCOT, 6)))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--tiny", "--out", str(out), "--prompts", str(prompts),
         "--tokenizer", str(REPO / ".cache/models/Qwen2.5-Coder-0.5B-Instruct"), "--rows", "4",
         "--prefill-tokens", "2048", "--baseline-prompts", "4", "--nf4-prompts", "4", "--profile-prompts", "6",
         "--sections", sections, "--workdir", str(tmp_path / "work")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "gpu_check.jsonl").read_text().splitlines()]
    assert not [r for r in rows if "error" in r], rows
    assert {r["section"] for r in rows} == set(sections.split(","))
    return rows, out


# The sections in two tests, each starting its own processes: they run side by side (about 20 s each).
@pytest.mark.process
def test_the_check_probes_reads_and_reports_invariant_answers_on_the_cpu(tmp_path):
    rows, _ = run_check(tmp_path, "probe,arithmetic,bf16")
    probe = next(r for r in rows if r["section"] == "probe")
    assert probe["floors"] == "all met" and probe["node"].startswith("no CUDA")
    loaded = next(r for r in rows if "load_s" in r)
    assert loaded["hub_kernels"] is False and "|prefill=2048|" not in loaded["reader_id"]  # float32: unkeyed
    speed = next(r for r in rows if r.get("reader") == "rows=4" and r["prompts"] == 12)
    assert speed["prompt_tokens"] > 0 and 0 < speed["share_of_bound"]
    (invariance,) = [r["invariance"] for r in rows if "invariance" in r]
    assert invariance == {"every_third": "4/4", "long_half": "6/6", "alone_0": "1/1", "alone_6": "1/1",
                          "alone_11": "1/1", "repeat": "12/12"}  # fmt: skip
    baselines = {r["reader"] for r in rows if "reader" in r and r.get("prompts") == 4}
    assert {"rows=4, its module called directly", "generate batch=16 (left padding)"} <= baselines
    # Decoding steps read by the host in runs of 8 (the node's way, the dry run's too) or every step: same answers.
    (every_step,) = [r for r in rows if r.get("reader") == "rows=4, the host reading the tokens every decoding step"]
    assert every_step["same_answers"] == "4/4"
    matmuls = [r for r in rows if "matmul" in r]
    assert matmuls and all(r["rows=16 position and company"] == "16/16" for r in matmuls)


@pytest.mark.process
def test_the_check_profiles_a_read_and_plans_its_memory_on_the_cpu(tmp_path):
    rows, out = run_check(tmp_path, "profile,memory")
    # The profile counts the read's forwards: the 6 prompts' first tokens come from prefills (packed, at least
    # one), each later token from a decoding step of up to 4 rows; a CPU launches no CUDA kernel.
    (profile,) = [r for r in rows if r["section"] == "profile"]
    assert profile["prompts"] == 6 and profile["prefills"] >= 1 and profile["decoding_steps"] >= 23 // 4
    assert profile["kernel_launches"] == 0 and profile["host_syncs"] == 0
    assert 0 < profile["forward_host_s"] < profile["seconds"] and profile["top_host"][0]["calls"] > 0
    assert "by host time" in (out / profile["table"]).read_text()
    memory = next(r for r in rows if r["section"] == "memory")
    assert memory["covered"] is True
