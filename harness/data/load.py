"""Entry points: read a dataset file of any packaged layout into canonical Examples.

The layouts are the registered :class:`harness.data.formats.DatasetFormat` records: each format's
module declares its own and registers it on import. This module imports the packaged ones, in
detection order, and hands out the loader (:mod:`harness.data.loader`), which reads every format
through the registry and imports none, so no format module imports this one.
"""

from __future__ import annotations

from typing import Any

# isort: off
# The packaged formats, imported in detection order: each module registers its format on import and
# the first format whose detector matches wins (2WikiMultiHopQA's fields extend HotpotQA's).
import harness.data.ragbench  # noqa: F401
import harness.data.dpr  # noqa: F401
import harness.data.expertqa  # noqa: F401
import harness.data.musique  # noqa: F401
import harness.data.ircot  # noqa: F401
import harness.data.twowiki  # noqa: F401
import harness.data.hotpotqa  # noqa: F401
import harness.data.demo  # noqa: F401
import harness.data.squad  # noqa: F401
import harness.data.beir  # noqa: F401
import harness.data.qasper  # noqa: F401
import harness.data.quality  # noqa: F401
import harness.data.narrativeqa  # noqa: F401

# isort: on
from harness.data.formats import layouts
from harness.data.loader import detect_layout, load_dataset, load_examples, split_from_filename

__all__ = ["detect_layout", "load_dataset", "load_examples", "split_from_filename"]


def __getattr__(name: str) -> Any:
    # LAYOUTS follows the registry: a format registered after this module loads is in it too.
    if name == "LAYOUTS":
        return layouts()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
