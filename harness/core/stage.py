"""What a stage reports about one question, and how that report becomes row columns.

Every stage kind returns its result together with an info dict (``StageInfo``) through its base class:
``Tree.expand -> (Pool, info)``, ``Diversifier.select -> (indices, info)``, ``Packer.pack -> Context``
whose ``extra`` is the packer's info. The pipeline turns each dict into columns named
``<stage>.<key>`` (``tree.question_class``, ``diversify.rule_triggered``, ``pack.objective``), so a
new fact reaches the results table by adding a key, with no change to the pipeline or the row layout.

Rows go to JSON (the row journal) and Parquet, so every value must be a scalar: lists, tuples and
dicts are stored as JSON strings and NumPy scalars as Python ones. Anything else is a programming
error in the stage and is reported with the stage and key that produced it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

#: one question's facts from one stage: {key: value}, values JSON-serialisable
StageInfo = dict[str, Any]

#: the stage names that prefix row columns
STAGES = ("tree", "diversify", "pack")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def scalar(value: Any, where: str = "value") -> Any:
    """``value`` as a Parquet- and JSON-friendly scalar: containers become JSON strings."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, (list, tuple, dict, set, frozenset, np.ndarray)):
        try:
            # NaN inside a container is written as the JSON token NaN, which json.loads reads back.
            return json.dumps(value, default=_json_default, allow_nan=True)
        except TypeError as err:
            raise TypeError(f"{where}: {err}") from None
    raise TypeError(f"{where}: a row value must be a scalar, list or dict, got {type(value).__name__}")


def stage_columns(stage: str, info: Mapping[str, Any] | None) -> dict[str, Any]:
    """Row columns ``<stage>.<key>`` from a stage's info dict, every value scalar."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; choose from {STAGES}")
    if info is None:
        return {}
    if not isinstance(info, Mapping):
        raise TypeError(f"stage {stage!r} reported {type(info).__name__}, expected a dict of facts")
    return {f"{stage}.{key}": scalar(value, f"stage {stage!r}, key {key!r}") for key, value in info.items()}


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is 0 (a ratio of nothing is undefined)."""
    return float(numerator) / float(denominator) if denominator else math.nan
