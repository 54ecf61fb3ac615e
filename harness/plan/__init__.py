"""A GPU memory plan made before anything loads: weights, KV cache and placement of a reader, from its
model's ``config.json`` alone (``python -m harness.plan``; docs/gpu-plan.md)."""

from harness.plan.configs import model_config_path
from harness.plan.gpus import GpuSpec, parse_gpus
from harness.plan.memory import MemoryPlan
from harness.plan.reader_plan import plan_reader

__all__ = ["GpuSpec", "MemoryPlan", "model_config_path", "parse_gpus", "plan_reader"]
