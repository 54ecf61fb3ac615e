"""Budgeted-RAG evaluation harness.

From Python (docs/python.md): ``harness.run(overrides)`` runs one configuration as ``python -m harness`` does,
``harness.sweep(overrides)`` a sweep on Hydra's basic launcher, ``harness.load_runs(*folders)`` reads their rows
as the report does and ``harness.compare(rows)`` gives the report's paired contrasts. Each is imported on first
use (``harness.api``), so ``import harness`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.core.version import VERSION as __version__

try:  # the configs' ${harness_home:...} resolves wherever the configs are composed from
    from harness.core.home import register_resolver as _register_resolver

    _register_resolver()
except ImportError:  # an interpreter without omegaconf (a model worker) never composes a config
    pass

if TYPE_CHECKING:
    from harness.api import ConfigError, JobsFailed, OverrideError, RunResult, compare, load_runs, run, sweep

# ``harness.run`` is the subpackage harness/run/, made callable there (its ``__call__`` is harness.api.run).
_API = ("ConfigError", "JobsFailed", "OverrideError", "RunResult", "compare", "load_runs", "sweep")
__all__ = [
    "ConfigError",
    "JobsFailed",
    "OverrideError",
    "RunResult",
    "__version__",
    "compare",
    "load_runs",
    "run",
    "sweep",
]


def __getattr__(name: str) -> Any:
    if name == "run":  # not imported yet: importing it sets the attribute
        import harness.run

        return harness.run
    if name in _API:
        from harness import api

        return getattr(api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
