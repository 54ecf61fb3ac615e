import sys

from harness.plan.cli import main

# The entry point sits above the layers: --sweep composes a multirun's jobs as the run would (harness.run), which
# the plan package itself may not import (the run's config check imports the plan).
from harness.run.sweep_preview import preview

sys.exit(main(preview=preview))
