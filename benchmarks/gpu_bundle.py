"""Pack what a GPU node lacks for ``benchmarks/gpu_check.py`` into one archive of at most 64 MiB.

A lent node has torch with CUDA and an older transformers, but no hydra, omegaconf or bitsandbytes, no model hub
and no weights (see docs/gpu.md). The archive holds:

- ``site/``: the packages the check needs in the versions ``make setup`` resolves, copied from this venv with
  their ``*.dist-info`` (the floors are checked by version): transformers and huggingface_hub with its newer
  dependencies, tokenizers and hf_xet (abi3 libraries: they load on any CPython 3.x), hydra, omegaconf, antlr4,
  and bitsandbytes with only its CPU and CUDA 13.0 libraries (the wheel's others are 120 MB);
- ``tokenizer/``: the offline Qwen2.5 tokenizer files (the models are built on the node from the packaged
  configs with seeded random weights);
- ``prompts.json``: the check's prompts, each IRCoT HotpotQA question once with its gold paragraphs cut to 700
  characters and once with all of its paragraphs.

    .venv/bin/python benchmarks/gpu_bundle.py --out .gpu_bundle/bundle.tar.gz
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
PACKAGES = {
    # import folder: distribution name (for its dist-info)
    "transformers": "transformers",
    "huggingface_hub": "huggingface_hub",
    "httpx2": "httpx2",
    "httpcore2": "httpcore2",
    "truststore": "truststore",
    "click": "click",
    "typer": "typer",
    "shellingham": "shellingham",
    "tokenizers": "tokenizers",
    "hf_xet": "hf_xet",
    "hydra": "hydra_core",
    "omegaconf": "omegaconf",
    "antlr4": "antlr4_python3_runtime",
    "bitsandbytes": "bitsandbytes",
}
BNB_KEEP = ("libbitsandbytes_cpu.so", "libbitsandbytes_cuda130.so")
TOKENIZER = ROOT / ".cache/models/Qwen2.5-Coder-0.5B-Instruct"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
IRCOT = ROOT.parent / "shared/data/hotpotqa_ircot/hotpotqa_dev_subsampled_485.jsonl"
LIMIT = 64 * 2**20


def check_prompts(path: Path, questions: int, gold_chars: int = 700) -> list[dict[str, str]]:
    """The first ``questions`` questions with their gold paragraphs (cut), then the same with all paragraphs."""
    gold, full = [], []
    with path.open() as lines:
        for number, line in enumerate(lines, 1):
            if len(gold) == questions:
                break
            record = json.loads(line)
            try:
                question, contexts = record["question_text"], record["contexts"]
                paragraphs = [(c["title"], c["paragraph_text"], bool(c.get("is_supporting"))) for c in contexts]
            except KeyError as error:
                raise ValueError(f"{path}:{number}: record lacks the field {error}") from error
            supporting = [f"{t}: {p[:gold_chars]}" for t, p, s in paragraphs if s]
            gold.append({"question": question, "context": "\n\n".join(supporting)})
            full.append({"question": question, "context": "\n\n".join(f"{t}: {p}" for t, p, _ in paragraphs)})
    return gold + full


def _skip(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    name = Path(info.name).name
    if name == "__pycache__" or name.endswith(".pyc"):
        return None
    if name.startswith("libbitsandbytes_") and name not in BNB_KEEP:
        return None
    return info


def build(out: Path, questions: int, ircot: Path = IRCOT) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    prompts = check_prompts(ircot, questions)
    staging = out.with_suffix(".prompts.json")
    staging.write_text(json.dumps(prompts))
    # gzip level 6: 24.5 MiB in a third of the time level 9 takes for 24.2 (the limit is 64).
    with tarfile.open(out, "w:gz", compresslevel=6) as archive:
        for folder, dist in PACKAGES.items():
            archive.add(SITE / folder, arcname=f"site/{folder}", filter=_skip)
            infos = sorted(SITE.glob(f"{dist}-*.dist-info")) or sorted(
                SITE.glob(f"{dist.replace('_', '-')}-*.dist-info")
            )
            if not infos:
                raise FileNotFoundError(f"no dist-info for {dist} in {SITE}")
            archive.add(infos[0], arcname=f"site/{infos[0].name}", filter=_skip)
        for name in TOKENIZER_FILES:
            archive.add(TOKENIZER / name, arcname=f"tokenizer/{name}")
        archive.add(staging, arcname="prompts.json")
    staging.unlink()
    size = out.stat().st_size
    if size > LIMIT:
        raise SystemExit(f"{out}: {size / 2**20:.1f} MiB, over the 64 MiB a GPU node's call carries")
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu_bundle/bundle.tar.gz")
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--ircot", type=Path, default=IRCOT, help="the IRCoT HotpotQA jsonl file")
    args = parser.parse_args()
    size = build(args.out, args.questions, args.ircot)
    print(f"{args.out}: {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
