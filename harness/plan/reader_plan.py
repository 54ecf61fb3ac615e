"""A reader's GPU memory plan with its verdict: :func:`harness.plan.memory.measure_plan`'s figures, and for a
plan that does not fit, one problem line naming the smallest placement that would (``harness.plan.suggest``,
which measures its trials with the same planner and so sits between the two)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from harness.plan.gpus import GpuSpec
from harness.plan.memory import MemoryPlan, measure_plan
from harness.plan.suggest import problem_line, suggestions


def plan_reader(
    reader: Mapping[str, Any],
    gpus: list[GpuSpec],
    prompt_tokens: int = 2048,
    batch_size: int | None = None,
    *,
    label: str | None = None,
    suggest: bool = True,
) -> MemoryPlan:
    """The memory ``reader`` needs on ``gpus`` for prompts of ``prompt_tokens`` tokens, and whether it fits;
    when it does not, ``problem`` says why and, with ``suggest``, what would (arguments as
    :func:`~harness.plan.memory.measure_plan`)."""
    plan, reason = measure_plan(reader, gpus, prompt_tokens, batch_size, label=label)
    if plan.fits:
        return plan
    ordered = sorted(gpus, key=lambda g: g.memory_bytes, reverse=True)
    found = suggestions(dict(reader), ordered, prompt_tokens, batch_size, plan) if suggest else []
    suggestion = ", or ".join(found) if found else None
    return replace(plan, problem=problem_line(plan, ordered, reason, suggestion), suggestion=suggestion)
