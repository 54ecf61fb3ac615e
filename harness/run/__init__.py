"""One evaluation run: the stage order, what jobs of one process share, sweep composition and the config check.

The package is callable: ``harness.run(["read=false"])`` is :func:`harness.api.run`, one run from Python, while
``harness.run.job`` and the other modules stay where they are.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, overrides: Sequence[str] = ()) -> Any:
        from harness.api.runs import run

        return run(overrides)


sys.modules[__name__].__class__ = _CallablePackage
