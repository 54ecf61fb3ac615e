"""The harness from Python (docs/python.md): ``harness.run``, ``harness.sweep``, ``harness.load_runs`` and
``harness.compare``, the command line's runs and the report's tables as Python values.

Imported on first use: a run imports only what the command line imports (its config check first, within a
second), the report's modules (pandas, scipy) come with ``load_runs`` and ``compare``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.api.results import compare, load_runs
    from harness.api.runs import JobsFailed, OverrideError, RunResult, run, sweep
    from harness.run.config_check import ConfigError

_WHERE = {
    "compare": "harness.api.results",
    "load_runs": "harness.api.results",
    "JobsFailed": "harness.api.runs",
    "OverrideError": "harness.api.runs",
    "RunResult": "harness.api.runs",
    "run": "harness.api.runs",
    "sweep": "harness.api.runs",
    "ConfigError": "harness.run.config_check",
}
__all__ = ["ConfigError", "JobsFailed", "OverrideError", "RunResult", "compare", "load_runs", "run", "sweep"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'harness.api' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_WHERE[name]), name)
