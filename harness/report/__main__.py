"""``python -m harness.report DIR [DIR ...]`` (see ``harness.report.cli``) and ``python -m harness.report
replicate`` (the replication study, see ``harness.report.replication``) and ``python -m harness.report view``
(the per-question evidence viewer, see ``harness.report.viewer``) and ``python -m harness.report diff`` (the
questions on which two policies disagree, see ``harness.report.diff``)."""

import sys

if sys.argv[1:2] == ["view"]:
    from harness.report.viewer import main as view

    raise SystemExit(view(sys.argv[2:]))

if sys.argv[1:2] == ["diff"]:
    from harness.report.diff import main as diff

    raise SystemExit(diff(sys.argv[2:]))

if sys.argv[1:2] == ["replicate"]:
    from harness.report.replication import main

    raise SystemExit(main(sys.argv[2:]))

from harness.report.cli import main

raise SystemExit(main())
