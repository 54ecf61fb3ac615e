"""Dataset loading: every registered dataset format as Examples.

The formats are the :class:`DatasetFormat` records in the registry (:func:`formats`); each format's
module declares and registers its own, and a format from outside the package is added with
:func:`register_format`. :func:`load_dataset` (the loader the dataset configs name) reads any of
them by ``layout=``, or recognises the layout with ``layout="auto"``.
"""

from typing import Any

from harness.data.errors import DatasetFormatError
from harness.data.formats import DatasetFormat, Identity, formats, layouts, register_format
from harness.data.load import detect_layout, load_dataset, load_examples

# LAYOUTS is read through __getattr__ below.
__all__ = [
    "DatasetFormat",
    "DatasetFormatError",
    "Identity",
    "detect_layout",
    "formats",
    "layouts",
    "load_dataset",
    "load_examples",
    "register_format",
]


def __getattr__(name: str) -> Any:
    # LAYOUTS follows the registry: a format registered after this package loads is in it too.
    if name == "LAYOUTS":
        return layouts()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
