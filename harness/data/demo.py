"""The packaged demo set: a dozen hand-written multi-hop questions in HotpotQA distractor layout.

The facts are invented, so a reader cannot answer from memory and must use the retrieved context.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from importlib import resources
from pathlib import Path

from harness.data import hotpotqa
from harness.data.formats import DatasetFormat, register_format

DEMO_FILE = "demo/demo_multihop.json"


def demo_file() -> AbstractContextManager[Path]:
    """A context manager yielding a filesystem path to the packaged demo file (also from a zip)."""
    return resources.as_file(resources.files("harness.data").joinpath(DEMO_FILE))


FORMAT = register_format(
    DatasetFormat(
        layout="demo",
        looks="the packaged demo set, in HotpotQA distractor layout",
        parse=hotpotqa.parse_record,  # the distractor setting, HotpotQA's default: the demo takes no setting
        id_field=hotpotqa.ID_FIELD,
        packaged=demo_file,
    )
)
