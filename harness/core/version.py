"""The harness's version: ``harness.__version__`` and the version a run records (``harness.core.checkout``)."""

VERSION = "0.1.0"
