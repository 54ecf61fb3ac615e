"""The plan puts each module on the GPU transformers would: its device map equals what
``get_balanced_memory`` + ``infer_auto_device_map`` (the functions ``from_pretrained`` calls, in
``transformers.integrations.accelerate``) decide for the same ``max_memory``, on the model built from its
packaged config with ``init_empty_weights`` (no weights), bitsandbytes' 4-bit layers swapped in for NF4."""

from __future__ import annotations

import pytest
import torch
from accelerate import init_empty_weights
from omegaconf import OmegaConf
from transformers import AutoConfig, AutoModelForCausalLM, BitsAndBytesConfig
from transformers.integrations.accelerate import get_balanced_memory, get_max_memory, infer_auto_device_map
from transformers.quantizers.auto import AutoHfQuantizer

from harness.plan import parse_gpus, plan_reader
from harness.plan.configs import packaged_config_path
from tests.conftest import compose_cfg

GIB = 2**30


def transformers_device_map(hub_id: str, nf4: bool, max_memory: dict[int, int], mode: str) -> dict[str, int | str]:
    """What ``transformers.integrations.accelerate._get_device_map`` decides, step by step."""
    path = packaged_config_path(hub_id)
    assert path is not None
    config = AutoConfig.for_model(**{k: v for k, v in _raw(path).items() if k != "auto_map"})
    with init_empty_weights(include_buffers=True):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    quantizer = None
    if nf4:
        bnb = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=torch.bfloat16,
            bnb_4bit_use_double_quant=True,
        )
        quantizer = AutoHfQuantizer.from_config(bnb, pre_quantized=False)
        quantizer.preprocess_model(model, device_map="auto")
    no_split = model._no_split_modules
    if mode == "sequential":
        limits = get_max_memory(dict(max_memory))
    else:
        limits = get_balanced_memory(
            model,
            max_memory=dict(max_memory),
            no_split_module_classes=no_split,
            hf_quantizer=quantizer,
            low_zero=mode == "balanced_low_0",
        )
    if quantizer is not None:
        limits = quantizer.adjust_max_memory(limits)
    return infer_auto_device_map(model, max_memory=limits, no_split_module_classes=no_split, hf_quantizer=quantizer)


def _raw(path) -> dict:
    import json

    return json.loads(path.read_text())


def device_of(module: str, device_map: dict[str, int | str]) -> int | str:
    """The device of ``module`` in a cleaned device map (whose keys may name a parent module)."""
    owners = [key for key in device_map if key == "" or module == key or module.startswith(key + ".")]
    return device_map[max(owners, key=len)]


CASES = [
    # (reader, overrides, GPUs, max_memory per GPU in GiB, mode, the GPUs that get modules)
    ("qwen2.5_32b", [], "4x24GiB", [20, 20, 20, 20], "auto", [0, 1, 2, 3]),  # NF4 32B balanced over four cards
    ("qwen2.5_32b", ["reader.device_map=sequential"], "4x24GiB", [12, 12, 12, 12], "sequential", [0, 1]),
    ("qwen2.5_32b", ["reader.device_map=balanced_low_0"], "4x24GiB", [20, 20, 20, 20], "balanced_low_0", [1, 2, 3]),
    ("qwen2.5_7b", ["reader.device_map=auto"], "3x24GiB", [6, 6, 6], "auto", [0, 1, 2]),  # bf16, no quantizer
]


@pytest.mark.parametrize(("reader", "overrides", "gpus", "limits", "mode", "used"), CASES, ids=lambda v: str(v))
def test_the_plan_places_each_module_where_transformers_would(reader, overrides, gpus, limits, mode, used):
    sizes = ",".join(f"{limit}GiB" for limit in limits)
    cfg = compose_cfg([f"reader={reader}", *overrides, f"reader.max_memory=[{sizes}]"])
    config = OmegaConf.to_container(cfg.reader, resolve=True)
    assert isinstance(config, dict)
    plan = plan_reader(config, parse_gpus(f"{gpus}@9.0"), prompt_tokens=512, batch_size=1)
    expected = transformers_device_map(
        config["pretrained"],
        config.get("quantization") == "nf4",
        {i: limit * GIB for i, limit in enumerate(limits)},
        mode,
    )
    assert plan.device_map, plan.lines()
    placed = {module: device_of(module, expected) for module in plan.device_map}
    assert plan.device_map == placed
    assert "cpu" not in expected.values() and "disk" not in expected.values()
    assert sorted(set(plan.device_map.values())) == used
