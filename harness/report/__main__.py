"""``python -m harness.report DIR [DIR ...]`` (see ``harness.report.cli``) and ``python -m harness.report
replicate`` (the replication study, see ``harness.report.replication``)."""

import sys

if sys.argv[1:2] == ["replicate"]:
    from harness.report.replication import main

    raise SystemExit(main(sys.argv[2:]))

from harness.report.cli import main

raise SystemExit(main())
