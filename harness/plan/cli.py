"""``python -m harness.plan``: a reader's GPU memory plan from the same config a run would compose.

    python -m harness.plan reader=qwen2.5_32b --gpus 24GiB
    python -m harness.plan reader=qwen2.5_32b reader.quantization=null --gpus 4x24GiB --prompt-tokens 4096
    python -m harness.plan --ladder --gpus 24GiB,40GiB,80GiB

    python -m harness.preview packer=packed,submod budget=96,128,160 read=false   (--sweep here hands over to it)

Exit status: 0 when the plan fits, 2 when it does not (one line on stderr names the problem and what would
fit), 1 when no plan can be made (an unreadable config or GPU list, no GPU named or visible). ``--ladder``
prints a markdown table of every GPU reader of the ladder, one column per comma-separated item of
``--gpus`` (``24GiB,4x24GiB``: one 24 GiB card; four of them), and exits 0. ``--sweep`` runs
``python -m harness.preview`` with the same arguments: the jobs a multirun with these overrides would launch.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.plan.gpus import GpuSpec, describe, gib, parse_gpu_groups, parse_gpus, visible_gpus
from harness.plan.memory import MemoryPlan
from harness.plan.reader_plan import plan_reader

CONFIG_DIR = Path(__file__).resolve().parents[2] / "conf"
LADDER_EXTRA = ("falcon3_3b", "phi3.5_mini")

# Composing a config may import a reader's module path check; nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def compose_reader(overrides: list[str]) -> tuple[dict[str, Any], str]:
    """The reader config a run with these overrides would get, and its ``reader=<choice>`` label."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    choice = cfg.hydra.runtime.choices.get("reader") or "?"
    reader = OmegaConf.to_container(cfg.reader, resolve=True)
    assert isinstance(reader, dict)
    return reader, f"reader={choice}"


def ladder_readers() -> list[str]:
    """Every Qwen2.5 reader config that runs on GPUs, then the other ladder rungs."""
    from omegaconf import OmegaConf

    names = []
    for path in sorted((CONFIG_DIR / "reader").glob("qwen2.5_*.yaml")):
        trainer = OmegaConf.load(path).get("trainer") or {}
        if trainer.get("accelerator") != "cpu":  # the CPU ladder (GGUF and its dequantized copy) has no GPU plan
            names.append(path.stem)
    return names + [name for name in LADDER_EXTRA if (CONFIG_DIR / "reader" / f"{name}.yaml").is_file()]


def _cell(plan: MemoryPlan) -> str:
    if plan.fits:
        # The fullest GPU against what it offers (vLLM: gpu_memory_utilization of it).
        need, offered = max(zip(plan.per_gpu_bytes, plan.gpu_capacity, strict=True), key=lambda p: p[0] / p[1])
        count = f"{plan.gpus_used} GPU{'s' if plan.gpus_used != 1 else ''}"
        return f"yes: {count}, {gib(need)} of {gib(offered)}"
    if plan.suggestion:
        return f"no: {plan.suggestion}"
    reason = (plan.problem or "does not fit").split(": ", 1)[-1].split(";")[0]
    return f"no: {reason}"


def ladder_table(groups: list[list[GpuSpec]], prompt_tokens: int, batch_size: int | None, extra: list[str]) -> str:
    heads = [describe(group) for group in groups]
    lines = [
        "| reader | model | precision | weights | KV per token | " + " | ".join(heads) + " |",
        "|---|---|---|---|---|" + "---|" * len(heads),
    ]
    for name in ladder_readers():
        try:
            reader, label = compose_reader([f"reader={name}", *extra])
            plans = [plan_reader(reader, group, prompt_tokens, batch_size, label=label) for group in groups]
        except (ValueError, FileNotFoundError) as error:  # one unplannable rung leaves the others' rows
            lines.append(f"| {name} | no plan: {error} |" + " |" * (len(heads) + 3))
            continue
        first = plans[0]
        cells = [label.removeprefix("reader="), first.model, first.precision, gib(first.weight_bytes)]
        cells.append(f"{first.kv_bytes_per_token / 2**10:.0f} KiB")
        lines.append("| " + " | ".join(cells + [_cell(p) for p in plans]) + " |")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.plan",
        description="GPU memory plan of a reader (weights, KV cache, placement) from its config.json alone.",
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m harness (reader=qwen2.5_32b)")
    parser.add_argument(
        "--gpus",
        help="the GPUs: 4x24GiB, 80GB, 2x24GiB,1x40GiB (GiB = 2**30 bytes, GB = 10**9; @8.6 adds a compute "
        "capability); default: the visible CUDA GPUs",
    )
    parser.add_argument("--prompt-tokens", type=int, default=2048, help="the run's longest prompt (default 2048)")
    parser.add_argument("--batch-size", type=int, default=None, help="replaces reader.batch_size")
    parser.add_argument("--ladder", action="store_true", help="every ladder reader on each --gpus item (markdown)")
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="the overrides are a multirun's (as after -m): list its jobs with their overrides, launcher resources, "
        "memory plan (on --gpus, the node's GPUs) and estimated cost; nothing starts",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command. ``--sweep`` is answered by ``python -m harness.preview``, which composes whole runs (a layer
    above this package): the arguments are handed to it in a process of its own."""
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_intermixed_args(argv)
    if args.sweep:
        forwarded = [a for a in argv if a != "--sweep"]
        return subprocess.call([sys.executable, "-m", "harness.preview", *forwarded])
    try:
        if args.ladder:
            groups = parse_gpu_groups(args.gpus) if args.gpus else [_visible_or_fail()]
            print(ladder_table(groups, args.prompt_tokens, args.batch_size, args.overrides))
            return 0
        gpus = parse_gpus(args.gpus) if args.gpus else _visible_or_fail()
        reader, label = compose_reader(args.overrides)
        plan = plan_reader(reader, gpus, args.prompt_tokens, args.batch_size, label=label)
    except Exception as error:
        return command_error("harness.plan", error)
    print("\n".join(plan.lines()))
    if not plan.fits:
        print(plan.problem, file=sys.stderr)
        return 2
    return 0


def command_error(prog: str, error: Exception) -> int:
    """Exit status 1 with one line for what a user can fix (a value, a file, a Hydra override, whose message
    names the override at fault); anything else is a bug and propagates."""
    fixable = isinstance(error, (ValueError, FileNotFoundError, LookupError))
    if not fixable and not type(error).__module__.startswith(("hydra", "omegaconf")):
        raise error
    print(f"{prog}: {error}".splitlines()[0] if not fixable else f"{prog}: {error}", file=sys.stderr)
    return 1


def _visible_or_fail() -> list[GpuSpec]:
    found = visible_gpus()
    if not found:
        raise ValueError("no CUDA GPU is visible to this process; name the cards, e.g. --gpus 4x24GiB")
    return found
