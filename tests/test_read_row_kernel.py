"""The row decoder's CUDA attention kernel (harness.read.row_kernel), run by Triton's interpreter on CPU tensors:
each row's output against the library's attention over that row's own keys, and the same output for a row
whatever the other rows, the buffer's size and the row's place in it. Then where the kernel is used and how the
reader identity names it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from harness.core.devices import CudaProbe, Gpu
from harness.read.hf import CUDA_PREFILL_TOKENS, TransformersReader
from harness.read.row_settings import row_attention_field, uses_row_kernel
from tests.conftest import REPO

H100 = Gpu(0, "NVIDIA H100 80GB HBM3", 80 << 30, (9, 0))

# The start of a script for ``interpreted``: a random-weight 2-layer Qwen2 and ten token prompts of 5 to 60 tokens.
TINY_MODEL_AND_PROMPTS = """
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM
from harness.read.row_decoding import RowDecoder
torch.manual_seed(0)
config = Qwen2Config(vocab_size=500, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
model = Qwen2ForCausalLM(config).eval()
g = torch.Generator().manual_seed(1)
lengths = torch.randint(5, 60, (10,), generator=g).tolist()
prompts = [torch.randint(0, 500, (n,), generator=g).tolist() for n in lengths]
"""


def interpreted(script: str, setup: str = "") -> str:
    """``script``'s output, run after ``setup`` with Triton's interpreter (it must be on before Triton compiles
    anything)."""
    done = subprocess.run(
        [sys.executable, "-c", setup + textwrap.dedent(script)],
        cwd=REPO,
        env={**os.environ, "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=80,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.process
def test_each_row_attends_over_its_own_keys_and_its_output_ignores_the_company():
    out = interpreted(
        """
        import torch, torch.nn.functional as F
        from harness.read.row_kernel import rows_decode_attention
        g = torch.Generator().manual_seed(0)
        rows, heads, kv_heads, dim, length = 4, 14, 2, 64, 150  # 7 query heads per kv head, as in Qwen2.5-0.5B
        k = torch.randn(rows, kv_heads, length + 20, dim, generator=g)[:, :, 5 : 5 + length]  # a strided view
        v = torch.randn(rows, kv_heads, length + 20, dim, generator=g)[:, :, 5 : 5 + length]
        q = torch.randn(rows, 1, heads, dim, generator=g).transpose(1, 2)
        starts = torch.tensor([0, 37, -1, 149])
        out = rows_decode_attention(q, k, v, starts, dim**-0.5)
        errors = []
        for row, start in enumerate(starts.tolist()):
            if start < 0:
                assert torch.equal(out[row], torch.zeros_like(out[row])), "an idle row must stay zero"
                continue
            ref = F.scaled_dot_product_attention(
                q[row : row + 1], k[row : row + 1, :, start:], v[row : row + 1, :, start:],
                scale=dim**-0.5, enable_gqa=True,
            )
            errors.append((ref - out[row : row + 1]).abs().max().item())
        # Row 1 again, in another buffer (another length, another slot, other neighbours): the same bits.
        own = length - 37
        k2, v2 = torch.randn(3, kv_heads, 300, dim, generator=g), torch.randn(3, kv_heads, 300, dim, generator=g)
        k2[2, :, 300 - own :], v2[2, :, 300 - own :] = k[1, :, 37:], v[1, :, 37:]
        q2 = torch.randn(3, heads, 1, dim, generator=g)
        q2[2] = q[1]
        again = rows_decode_attention(q2, k2, v2, torch.tensor([10, 0, 300 - own]), dim**-0.5)
        print(max(errors), torch.equal(again[2], out[1]))
        """
    )
    error, same = out.split()
    assert float(error) < 1e-5
    assert same == "True"


@pytest.mark.process
def test_each_packed_prompt_attends_over_its_own_span_and_its_output_ignores_the_company():
    out = interpreted(
        """
        import torch, torch.nn.functional as F
        from harness.read.prefill_kernel import segments_prefill_attention
        g = torch.Generator().manual_seed(0)
        heads, kv_heads, dim, length = 14, 2, 64, 300  # 7 query heads per kv head, as in Qwen2.5-0.5B
        q, k, v = (torch.randn(1, h, length, dim, generator=g) for h in (heads, kv_heads, kv_heads))
        segments = [(0, 70), (70, 200), (210, 290)]  # 200-210 and 290-300: padding
        out = segments_prefill_attention(q, k, v, segments, dim**-0.5)
        errors = []
        for start, end in segments:
            span = slice(start, end)
            ref = F.scaled_dot_product_attention(
                q[:, :, span], k[:, :, span], v[:, :, span], is_causal=True, scale=dim**-0.5, enable_gqa=True
            )
            errors.append((ref - out[:, :, span]).abs().max().item())
        padding = bool((out[:, :, 200:210] == 0).all() and (out[:, :, 290:] == 0).all())
        # The second prompt again, at another offset of a longer chunk between other prompts: the same bits.
        q2, k2, v2 = (torch.randn(1, h, 400, dim, generator=g) for h in (heads, kv_heads, kv_heads))
        for mine, theirs in ((q2, q), (k2, k), (v2, v)):
            mine[:, :, 5:135] = theirs[:, :, 70:200]
        again = segments_prefill_attention(q2, k2, v2, [(0, 5), (5, 135), (135, 390)], dim**-0.5)
        print(max(errors), padding, torch.equal(again[:, :, 5:135], out[:, :, 70:200]))
        """
    )
    error, padding, same = out.split()
    assert float(error) < 1e-5
    assert padding == "True" and same == "True"


@pytest.mark.process
def test_row_decoding_through_the_kernel_gives_the_library_path_s_answers_in_any_company():
    out = interpreted(
        """
        library = RowDecoder(model, 3, 8, {-1}, kernel=False).generate(prompts)
        kernel = RowDecoder(model, 3, 8, {-1}, kernel=True).generate(prompts)
        alone = RowDecoder(model, 3, 8, {-1}, kernel=True, prefill_tokens=128).generate(prompts[3:6])
        packed = RowDecoder(model, 3, 8, {-1}, kernel=True, prefill_tokens=128).generate(prompts)
        print(kernel == library, packed[3:6] == alone, sum(len(t) == 8 for t in kernel))
        """,
        setup=TINY_MODEL_AND_PROMPTS,
    )
    assert out.split() == ["True", "True", "10"]


@pytest.mark.process
def test_the_static_step_on_fixed_buffers_gives_the_host_steps_answers():
    """The step a CUDA graph captures (fixed buffers, every position and the keys' end on the device, the inputs
    changed in place) against the host's step, through the same kernel: the same answers, in runs of one and of
    four steps, with prompts prefilled alone and packed, the buffers replaced between runs."""
    out = interpreted(
        """
        eos = set(range(0, 500, 9))
        from harness.read.static_step import StaticStep
        buffers = set()  # the key buffers' addresses at the start of each run
        run = StaticStep.run
        StaticStep.run = lambda self, *args: buffers.add(args[3].keys[0].data_ptr()) or run(self, *args)
        host = RowDecoder(model, 3, 8, eos, kernel=True).generate(prompts)
        same = [
            RowDecoder(model, 3, 8, eos, kernel=True, step="static", sync_every=k, prefill_tokens=p).generate(prompts)
            == host
            for k in (1, 4) for p in (0, 128)
        ]
        print(all(same), sum(len(t) < 8 for t in host), len(buffers) > 1)
        """,
        setup=TINY_MODEL_AND_PROMPTS,
    )
    same, early, grown = out.split()
    assert same == "True"
    assert int(early) >= 2  # answers ending inside a run of steps
    assert grown == "True"  # buffers replaced between runs (a graph would be captured again)


def test_the_static_and_graph_steps_need_the_kernel_and_the_graph_cuda():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from harness.read.row_decoding import RowDecoder

    config = Qwen2Config(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1)  # fmt: skip
    model = Qwen2ForCausalLM(config).eval()
    with pytest.raises(ValueError, match="needs the row kernel"):
        RowDecoder(model, 2, 4, {-1}, kernel=False, step="static")
    with pytest.raises(ValueError, match="CUDA only"):
        RowDecoder(model, 2, 4, {-1}, kernel=True, step="graph")
    with pytest.raises(ValueError, match="step must be one of"):
        RowDecoder(model, 2, 4, {-1}, step="compiled")


def test_the_kernel_attends_on_cuda_only_and_can_be_turned_off(monkeypatch):
    assert not uses_row_kernel("cpu")
    assert uses_row_kernel("cuda")  # Triton is installed with the dev tools, as on every CUDA build of torch
    assert row_attention_field("cuda-sm90") == "|attn=triton64"
    assert row_attention_field("cuda-sm90", packed=True) == "|attn=triton64|prefill_attn=triton64x64"
    monkeypatch.setenv("HARNESS_ROW_KERNEL", "0")
    assert not uses_row_kernel("cuda") and row_attention_field("cuda-sm90") == ""


@pytest.mark.parametrize(
    ("prefill", "field"), [(None, f"|prefill={CUDA_PREFILL_TOKENS}"), (0, ""), (4096, "|prefill=4096")]
)
def test_a_gpu_reader_s_identity_names_its_packed_prefill_and_attention_kernel(prefill, field):
    settings = {} if prefill is None else {"prefill_tokens": prefill}
    reader = TransformersReader(
        name="q", pretrained="Qwen/Qwen2.5-7B-Instruct", dtype="bfloat16", trainer={"accelerator": "gpu"}, **settings
    )
    assert reader.prefill_tokens == (prefill or 0)  # on the CPU, unset is each prompt alone
    reader.devices.probe = CudaProbe("2.11.0+cu130", "13.0", None, (H100,))
    packed = "|prefill_attn=triton64x64" if field else ""  # the packed prefill's own kernel
    assert reader.reader_id.endswith(f"|rows=8{field}|attn=triton64{packed}|device=cuda-sm90")


def test_a_negative_packed_prefill_is_refused_naming_the_reader():
    with pytest.raises(ValueError, match=r"reader 'q': prefill_tokens must be >= 0"):
        TransformersReader(name="q", pretrained="Qwen/Qwen2.5-7B-Instruct", prefill_tokens=-1)


@pytest.mark.parametrize(("step", "field"), [("host", ""), ("static", ""), ("graph", "|step=graph")])
def test_only_the_graph_step_joins_a_gpu_reader_s_identity(step, field):
    # The static step computes the host step's kernels on the same keys (the test above); a graph replays them,
    # but a library may choose other kernels under capture, so its answers are kept apart until measured equal.
    reader = TransformersReader(
        name="q", pretrained="Qwen/Qwen2.5-7B-Instruct", dtype="bfloat16", trainer={"accelerator": "gpu"},
        decode_step=step, sync_every=8,
    )  # fmt: skip
    reader.devices.probe = CudaProbe("2.11.0+cu130", "13.0", None, (H100,))
    assert reader.reader_id.endswith(f"|attn=triton64|prefill_attn=triton64x64{field}|device=cuda-sm90")


def test_bad_decoding_step_settings_are_refused_naming_the_reader():
    with pytest.raises(ValueError, match=r"reader 'q': decode_step must be one of"):
        TransformersReader(name="q", pretrained="Qwen/Qwen2.5-7B-Instruct", decode_step="compiled")
    with pytest.raises(ValueError, match=r"reader 'q': decode_step=graph is a step of decoding=rows"):
        TransformersReader(name="q", pretrained="Qwen/Qwen2.5-7B-Instruct", decode_step="graph", decoding="generate")
    with pytest.raises(ValueError, match=r"reader 'q': sync_every must be >= 1"):
        TransformersReader(name="q", pretrained="Qwen/Qwen2.5-7B-Instruct", sync_every=0)
