"""The GPU check: one run on a lent GPU node, with no hub and no weights, that says whether the reader ladder's
GPU paths load, read at the card's speed and give answers independent of their company.

Weights cannot reach a lent node, so each model is built there from the packaged config
(``harness/plan/model_configs``) with seeded random weights and the offline Qwen2.5 tokenizer, saved to a
folder in RAM and read through ``TransformersReader`` as a user's config would. Random weights say nothing about
answer quality; their greedy decoding is full of near-ties, which makes the invariance check strict. The
prompts are IRCoT HotpotQA questions, each with its gold paragraphs and with all of them
(``benchmarks/gpu_bundle.py`` packs them with the packages the node lacks).

Sections, most important first, each in its own process under its own time limit, each appending JSON lines to
``OUT/gpu_check.jsonl`` (a section killed at its limit keeps what it wrote):

- ``probe``: the card, torch, transformers, Triton, the floors of pyproject.toml against what is installed;
- ``arithmetic``: whether a bf16 matmul row at a fixed number of rows depends on its position and company, and
  at another number of rows (what row decoding rests on), and whether a prefill's attention repeats exactly;
- ``bf16``: Qwen2.5-7B in bf16, row decoding: prompts/s and the share of the work's bound, the library's batched
  ``generate`` and the per-row attention calls beside it, answers in three companies and read twice, and
  whether hub kernels were used;
- ``profile``: torch.profiler over the same read path on ``--profile-prompts`` prompts: top operations by host
  and device time, kernel launches and host-device synchronisations per forward, prefills and decoding steps
  counted apart, host time outside any forward; the tables in ``OUT/profile_bf16.txt``;
- ``nf4``: the same weights loaded as NF4 offline (bitsandbytes), answers in three companies;
- ``memory``: the plan's per-GPU figure against the device's use after a 16 x 2048-token prefill;
- ``plan``: the config check's verdicts on the ladder for the visible card.

``--tiny`` runs every section on the CPU with 2-layer models (what ``make test`` checks).

    python benchmarks/gpu_check.py --bundle /tmp/bundle --out $OUT        # on the node
    .venv/bin/python benchmarks/gpu_check.py --tiny --out outputs/gpu_check  # on a CPU
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Seconds each section may take: together under the 10 minutes a lent node's command may run.
SECTIONS = {"probe": 30, "arithmetic": 40, "bf16": 200, "profile": 90, "nf4": 100, "memory": 60, "plan": 40}
CONFIGS = ROOT / "harness/plan/model_configs"
MODEL = "Qwen/Qwen2.5-7B-Instruct"
TINY = {"num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4,
        "num_key_value_heads": 2}  # fmt: skip
H200_BF16_FLOPS = 790e12
H200_BYTES_PER_S = 4.8e12
NEW_TOKENS = 24


def emit(out: Path, section: str, **row: Any) -> None:
    row = {"section": section, **row}
    with (out / "gpu_check.jsonl").open("a") as handle:
        handle.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def model_folder(args, dtype: str = "bfloat16") -> Path:
    """The random-weight model's folder, built once per run (the tokenizer files beside the weights)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = Path(args.workdir) / ("tiny" if args.tiny else "qwen2.5-7b")
    if (folder / "config.json").exists():
        return folder
    config = AutoConfig.from_pretrained(CONFIGS / f"{MODEL.replace('/', '__')}.json")
    for key, value in (TINY if args.tiny else {}).items():
        setattr(config, key, value)
    if args.tiny and getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[: config.num_hidden_layers]
    torch.manual_seed(0)
    with torch.device("cpu" if args.tiny else "cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    staging = folder.with_name(folder.name + ".partial")
    model.save_pretrained(staging)
    for name in Path(args.tokenizer).iterdir():  # the tokenizer's files only, never a model's weights
        if name.name.startswith(("tokenizer", "chat_template", "vocab", "merges", "special_tokens")):
            shutil.copy(name, staging / name.name)
    staging.rename(folder)
    del model
    return folder


def prompts(args) -> list:
    from harness.read.base import PromptRequest

    records = json.loads(Path(args.prompts).read_text())
    return [PromptRequest(r["question"], r["context"]) for r in records]


def reader(args, folder: Path, batch_size: int, **settings: Any):
    from harness.read.hf import TransformersReader
    from harness.read.row_decoding import CUDA_SYNC_EVERY

    trainer = {"accelerator": "cpu" if args.tiny else "gpu", "devices": 1}
    made = TransformersReader(
        name="gpu-check",
        pretrained=str(folder),
        dtype=settings.pop("dtype", "float32" if args.tiny else "bfloat16"),
        batch_size=batch_size,
        max_new_tokens=NEW_TOKENS,
        cache_dir=None,  # every read generates afresh
        show_progress=False,
        trainer=trainer,
        # On the CPU too the steps are read in runs, as on the node, so that the dry run covers that path.
        sync_every=settings.pop("sync_every", args.sync_every or CUDA_SYNC_EVERY),
        decode_step=settings.pop("decode_step", args.decode_step if settings.get("decoding") != "generate" else "host"),
        **{**({"prefill_tokens": args.prefill_tokens} if args.prefill_tokens is not None else {}), **settings},
    )
    made.args = args
    return made


def timed_read(model, requests) -> tuple[list[str], float]:
    """Raw generations of ``requests`` (the readers keep no response cache), and the seconds they took."""
    began = time.perf_counter()
    raw = [r["raw"] for r in model.responses(requests)]
    return raw, time.perf_counter() - began


def sharing(model, weights, decode_width: int | None, **settings: Any):
    """Another reader over the weights ``model`` has loaded (no second load): ``decode_width`` None decodes
    with the library's batched ``generate``."""
    from harness.read.module import ReaderModule

    other = reader(model.args, Path(model.spec.pretrained), decode_width or 16, **settings)
    other._module = ReaderModule(
        weights,
        other.tokenizer,
        max_new_tokens=NEW_TOKENS,
        decode_width=decode_width,
        prefill_tokens=other.prefill_tokens if decode_width else 0,
        sync_every=other.sync_every,
        decode_step=other.decode_step,
    )
    return other


def direct_decoding(model, requests) -> float:
    """Seconds the reader's module takes to generate ``requests`` called directly (no Lightning Trainer, no
    response cache): what the read path adds is the difference."""
    import torch

    prompts = [model.render(r) for r in requests]
    began = time.perf_counter()
    model.module.generate(prompts)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - began


def companies(model, requests, reference: list[str]) -> dict[str, Any]:
    """How many raw answers equal the reference read in other companies: every third prompt, the long half,
    three prompts alone, and the whole set read again."""
    found: dict[str, Any] = {}
    thirds = list(range(0, len(requests), 3))
    long_half = list(range(len(requests) // 2, len(requests)))
    singles = [0, len(requests) // 2, len(requests) - 1]
    cases = [("every_third", thirds), ("long_half", long_half)] + [(f"alone_{i}", [i]) for i in singles]
    cases.append(("repeat", list(range(len(requests)))))
    for label, chosen in cases:
        raw, _ = timed_read(model, [requests[i] for i in chosen])
        found[label] = f"{sum(a == reference[i] for a, i in zip(raw, chosen, strict=True))}/{len(chosen)}"
    return found


def bound_seconds(params: float, weight_bytes: float, prompt_tokens: int, count: int) -> float:
    """The work's bound on an H200: the prefill's FLOP at bf16 peak plus decoding steps of 16 rows (as a
    16-wide decoder takes) each streaming the weights once."""
    steps = count * NEW_TOKENS / 16
    return 2 * params * prompt_tokens / H200_BF16_FLOPS + steps * weight_bytes / H200_BYTES_PER_S


def section_probe(args, out: Path) -> None:
    import torch
    import transformers

    from harness.core.devices import probe_cuda
    from harness.run.install_check import version_problems

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    emit(
        out,
        "probe",
        node=probe_cuda().describe(),
        torch=torch.__version__,
        transformers=transformers.__version__,
        triton=triton_version,
        python=platform.python_version(),
        floors=version_problems() or "all met",
    )


def section_arithmetic(args, out: Path) -> None:
    import torch
    import torch.nn.functional as F

    device, dtype = ("cpu", torch.float32) if args.tiny else ("cuda", torch.bfloat16)
    generator = torch.Generator(device).manual_seed(0)
    shapes = [(128, 256)] if args.tiny else [(3584, 18944), (18944, 3584), (3584, 152064)]
    for fan_in, fan_out in shapes:
        weight = torch.randn(fan_out, fan_in, device=device, dtype=dtype, generator=generator) * fan_in**-0.5
        inputs = torch.randn(256, fan_in, device=device, dtype=dtype, generator=generator)
        found = {}
        for rows in (16, 64):
            reference = F.linear(inputs[:rows], weight)[0]
            same = 0
            for trial in range(16):
                company = torch.randperm(256, device=device, generator=generator)[:rows]
                company[trial % rows] = 0
                same += torch.equal(F.linear(inputs[company], weight)[trial % rows], reference)
            found[f"rows={rows} position and company"] = f"{same}/16"
        alone = F.linear(inputs[:1], weight)[0]
        found["rows=1 vs rows=16"] = "equal" if torch.equal(alone, F.linear(inputs[:16], weight)[0]) else "differ"
        emit(out, "arithmetic", matmul=f"{fan_in}x{fan_out}", **found)
    q, k, v = (torch.randn(1, 28, 900, 128, device=device, dtype=dtype, generator=generator) for _ in range(3))
    first = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    again = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    emit(out, "arithmetic", prefill_attention_repeats=bool(torch.equal(first, again)))


def section_bf16(args, out: Path) -> None:
    import torch

    from harness.read.row_settings import STEPS

    folder = model_folder(args)
    requests = prompts(args)
    half = len(requests) // 2
    rows = reader(args, folder, args.rows)
    began = time.perf_counter()
    rows.module  # noqa: B018 - loads the weights
    model = rows.module.generator
    params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    emit(out, "bf16", load_s=round(time.perf_counter() - began, 1), reader_id=rows.reader_id,
         hub_kernels=bool(getattr(model, "use_kernels", False)), params=params)  # fmt: skip
    try:
        timed_read(rows, requests[:4])  # compiles the attention kernel
    except Exception as error:  # noqa: BLE001 - say so, and check the rest with one attention call per row
        emit(out, "bf16", kernel_error=f"{type(error).__name__}: {str(error)[:300]}")
        os.environ["HARNESS_ROW_KERNEL"] = "0"
        rows = reader(args, folder, args.rows)
        rows._module = sharing(rows, model, args.rows)._module
    tokens = sum(rows.count_prompt_tokens_many([rows.render(r) for r in requests]))
    reference, seconds = timed_read(rows, requests)
    bound = bound_seconds(params, weight_bytes, tokens, len(requests))
    # share_of_bound to 3 significant digits: on a CPU (--tiny) it is far below 0.001
    emit(out, "bf16", reader=f"rows={args.rows}", prompts=len(requests), prompt_tokens=tokens,
         seconds=round(seconds, 2), prompts_per_s=round(len(requests) / seconds, 2),
         prompt_tokens_per_s=round(tokens / seconds), bound_s=round(bound, 2),
         share_of_bound=float(f"{bound / seconds:.3g}"))  # fmt: skip
    emit(out, "bf16", invariance=companies(rows, requests, reference))
    subset = requests[: args.baseline_prompts // 2] + requests[half : half + args.baseline_prompts // 2]
    # Each decoding step the main read does not use, on CUDA (the static and graph steps need the row kernel).
    steps = [s for s in STEPS if s != args.decode_step and torch.cuda.is_available()]
    baselines = (
        *((f"rows={args.rows}, decode_step={step}", args.rows, {"decode_step": step}, "1") for step in steps),
        (f"rows={args.rows}, the host reading the tokens every decoding step", args.rows, {"sync_every": 1}, "1"),
        (f"rows={args.rows}, each prompt prefilled alone", args.rows, {"prefill_tokens": 0}, "1"),
        ("rows=16, each prompt alone, one attention call per row and layer", 16, {"prefill_tokens": 0}, "0"),
        ("generate batch=16 (left padding)", None, {"decoding": "generate"}, "1"),
    )
    _, spent = timed_read(rows, subset)
    emit(out, "bf16", reader=f"rows={args.rows}", prompts=len(subset), seconds=round(spent, 2),
         prompts_per_s=round(len(subset) / spent, 2))  # fmt: skip
    direct = direct_decoding(rows, subset)
    emit(out, "bf16", reader=f"rows={args.rows}, its module called directly", prompts=len(subset),
         seconds=round(direct, 2), prompts_per_s=round(len(subset) / direct, 2))  # fmt: skip
    expected = [reference[requests.index(r)] for r in subset]
    for label, width, settings, kernel in baselines:
        os.environ["HARNESS_ROW_KERNEL"] = kernel
        raw, spent = timed_read(sharing(rows, model, width, **settings), subset)
        # Reading the tokens every step, or another decoding step (graph replay against the eager step), changes
        # when rows refill or which launches run, never an answer: all must equal the reference.
        same = {"same_answers": f"{sum(a == b for a, b in zip(raw, expected, strict=True))}/{len(subset)}"}
        compared = "sync_every" in settings or "decode_step" in settings
        emit(out, "bf16", reader=label, prompts=len(subset), seconds=round(spent, 2),
             prompts_per_s=round(len(subset) / spent, 2), **(same if compared else {}))  # fmt: skip
    os.environ.pop("HARNESS_ROW_KERNEL", None)
    del model
    torch.cuda.empty_cache() if torch.cuda.is_available() else None


# Runtime calls that launch a kernel, and those that make the host wait for the device (a .tolist() of
# logits is a copy to the host and a stream synchronisation).
LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"}
SYNCS = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy"}


class ForwardClock:
    """Counts the model's forwards, prefills (more than one token per row) apart from decoding steps, and the
    host seconds spent inside them: what the read spends outside any forward is the rest."""

    def __init__(self, model) -> None:
        self.prefills = self.steps = 0
        self.inside = 0.0
        self._began = 0.0
        self._hooks = [
            model.register_forward_pre_hook(self._enter, with_kwargs=True),
            model.register_forward_hook(self._leave),
        ]

    def _enter(self, module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None and ids.shape[-1] > 1:
            self.prefills += 1
        else:
            self.steps += 1
        self._began = time.perf_counter()

    def _leave(self, module, args, output) -> None:
        self.inside += time.perf_counter() - self._began

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()


def section_profile(args, out: Path) -> None:
    """torch.profiler over the reader's own read path (Lightning, thread limit and bookkeeping included) for
    ``--profile-prompts`` prompts: the top operations by host and by device time, kernel launches and
    host-device synchronisations per forward (prefills and decoding steps counted apart), and the host time
    outside any forward.
    The tables go to ``OUT/profile_bf16.txt``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    requests = prompts(args)[: args.profile_prompts]
    rows = reader(args, model_folder(args), args.rows)
    timed_read(rows, requests[:4])  # loads the weights and compiles the attention kernel, outside the profile
    model = rows.module.generator
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    clock = ForwardClock(model)
    try:
        with profile(activities=activities) as prof:
            _, seconds = timed_read(rows, requests)
    finally:
        clock.remove()
    names = [event.name for event in prof.events()]
    launches = sum(name in LAUNCHES for name in names)
    syncs = sum(name in SYNCS for name in names)
    forwards = clock.prefills + clock.steps
    averages = prof.key_averages()
    by_host = averages.table(sort_by="self_cpu_time_total", row_limit=25)
    by_device = averages.table(sort_by="self_device_time_total", row_limit=25) if cuda else "(no CUDA device)"
    (out / "profile_bf16.txt").write_text(
        f"{len(requests)} prompts, rows={args.rows}, {seconds:.2f} s under the profiler\n\n"
        f"by host time\n{by_host}\n\nby device time\n{by_device}\n"
    )

    def top(key: str) -> list[dict[str, Any]]:
        ranked = sorted(averages, key=lambda a: getattr(a, key), reverse=True)[:10]
        return [{"op": a.key, "ms": round(getattr(a, key) / 1e3, 2), "calls": a.count} for a in ranked]

    emit(out, "profile", reader=f"rows={args.rows}", prompts=len(requests), seconds=round(seconds, 2),
         prefills=clock.prefills, decoding_steps=clock.steps, forward_host_s=round(clock.inside, 3),
         outside_forward_s=round(seconds - clock.inside, 3), kernel_launches=launches, host_syncs=syncs,
         launches_per_forward=round(launches / max(forwards, 1), 1),
         syncs_per_forward=round(syncs / max(forwards, 1), 2),
         top_host=top("self_cpu_time_total"), top_device=top("self_device_time_total") if cuda else [],
         table="profile_bf16.txt")  # fmt: skip


def section_nf4(args, out: Path) -> None:
    folder = model_folder(args)
    requests = prompts(args)
    half = len(requests) // 2
    count = args.nf4_prompts // 2
    chosen = requests[:count] + requests[half : half + count]  # gold and full contexts alike
    began = time.perf_counter()
    nf4 = reader(args, folder, args.rows, quantization="nf4", dtype="bfloat16")
    try:
        nf4.module  # noqa: B018
    except Exception as error:  # noqa: BLE001 - a load that fails is this section's finding
        emit(out, "nf4", status=f"did not load: {str(error).splitlines()[0]}")
        return
    emit(out, "nf4", load_s=round(time.perf_counter() - began, 1), reader_id=nf4.reader_id,
         hub_kernels=bool(getattr(nf4.module.generator, "use_kernels", False)))  # fmt: skip
    reference, seconds = timed_read(nf4, chosen)
    emit(out, "nf4", prompts=len(chosen), seconds=round(seconds, 2), prompts_per_s=round(len(chosen) / seconds, 2))
    emit(out, "nf4", invariance=companies(nf4, chosen, reference))


def section_memory(args, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from harness.plan import GpuSpec, plan_reader

    folder = model_folder(args)
    device = "cpu" if args.tiny else "cuda"
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.bfloat16, use_kernels=False, device_map={"": 0} if device == "cuda" else None
    ).eval()
    batch, length = (2, 64) if args.tiny else (16, 2048)
    ids = torch.randint(0, model.config.vocab_size, (batch, length), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        model(input_ids=ids.to(device), use_cache=True, logits_to_keep=1)
    if args.tiny:
        used, total = 0, 64 * 2**30
    else:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        used = total - free
    config = {
        "_target_": "harness.read.hf.TransformersReader",
        "pretrained": str(folder),
        "dtype": "bfloat16",
        "batch_size": batch,
        "max_new_tokens": NEW_TOKENS,
        "trainer": {"accelerator": "gpu", "devices": 1},
    }
    plan = plan_reader(config, [GpuSpec("this GPU", total)], prompt_tokens=length)
    emit(out, "memory", batch=batch, prompt_tokens=length, device_used_gb=round(used / 1e9, 2),
         planned_gb=round(plan.per_gpu_bytes[0] / 1e9, 2) if plan.per_gpu_bytes else None,
         covered=bool(plan.per_gpu_bytes) and plan.per_gpu_bytes[0] >= used)  # fmt: skip


def section_plan(args, out: Path) -> None:
    gpus = "141GiB" if args.tiny else None
    cases = [
        ["--ladder"],
        ["reader=qwen2.5_7b"],
        ["reader=qwen2.5_32b", "reader.quantization=null"],
        ["reader=qwen2.5_32b", "reader.quantization=null", "reader.batch_size=4096"],
    ]
    for case in cases:
        command = [sys.executable, "-m", "harness.plan", *case] + (["--gpus", gpus] if gpus else [])
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=60)
        lines = (done.stdout + done.stderr).strip().splitlines()
        verdict = (
            [line for line in lines if line.startswith(("fits", "problem", "GPU 0"))]
            if case[0] != "--ladder"
            else lines
        )
        emit(out, "plan", case=" ".join(case), exit=done.returncode, lines=verdict)


def run_section(name: str, args) -> None:
    out = Path(args.out)
    try:
        globals()[f"section_{name}"](args, out)
    except Exception as error:  # noqa: BLE001 - the report says what failed and the run goes on
        emit(out, name, error=f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
        raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu_check.jsonl")
    parser.add_argument("--bundle", type=Path, help="the unpacked bundle (tokenizer/, prompts.json)")
    parser.add_argument("--tokenizer", type=Path)
    parser.add_argument("--prompts", type=Path)
    parser.add_argument("--workdir", type=Path, help="where the models are built (default: /dev/shm or a tmp dir)")
    parser.add_argument("--tiny", action="store_true", help="2-layer models on the CPU: checks the script itself")
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--section", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=128, help="decoding rows (reader.batch_size)")
    parser.add_argument("--prefill-tokens", type=int, help="the reader's packed prefill (unset: its default)")
    parser.add_argument("--sync-every", type=int, help="decoding steps per read by the host (unset: 8, as on CUDA)")
    parser.add_argument("--decode-step", default="host", help="the main read's decoding step: host, static or graph")
    parser.add_argument("--baseline-prompts", type=int, default=32)
    parser.add_argument("--nf4-prompts", type=int, default=32)
    parser.add_argument("--profile-prompts", type=int, default=32)
    args = parser.parse_args()
    if args.bundle:
        args.tokenizer = args.tokenizer or args.bundle / "tokenizer"
        args.prompts = args.prompts or args.bundle / "prompts.json"
    if not args.tokenizer or not args.prompts:
        parser.error("give --bundle, or --tokenizer and --prompts")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.section:
        run_section(args.section, args)
        return
    shm = Path("/dev/shm")
    args.workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gpu_check_", dir=shm if shm.is_dir() else None))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        for name in args.sections.split(","):
            command = [sys.executable, __file__, "--section", name, *sys.argv[1:], "--workdir", str(args.workdir)]
            limit = SECTIONS[name] * (3 if args.tiny else 1)
            try:
                done = subprocess.run(command, timeout=limit)
                if done.returncode:
                    print(f"section {name} exited {done.returncode}", flush=True)
            except subprocess.TimeoutExpired:
                emit(args.out, name, error=f"stopped at its limit of {limit} s")
    finally:
        shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
