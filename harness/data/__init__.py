"""Dataset loading: HotpotQA, MuSiQue, 2WikiMultiHopQA and the packaged demo set as Examples."""

from harness.data.errors import DatasetFormatError
from harness.data.load import LAYOUTS, detect_layout, load_dataset, load_examples

__all__ = ["LAYOUTS", "DatasetFormatError", "detect_layout", "load_dataset", "load_examples"]
