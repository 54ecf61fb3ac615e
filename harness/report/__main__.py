"""``python -m harness.report DIR [DIR ...]``: see ``harness.report.cli``."""

from harness.report.cli import main

raise SystemExit(main())
