"""``python -m harness.report replicate``: the replication study, docs/replication.md, from the studies' runs.

Each claim of the three papers has a sweep under ``sweeps/replication_*.yaml`` (or an earlier study whose
sweep it shares) that writes into ``outputs/studies/<study>``. This module reads whatever of those
directories exist, computes the tables with the report's own analyses (question-clustered and paired
bootstraps, incremental validity, the diversity study's tuned operating points and regret), gives each
claim a verdict from its confidence interval, draws the figures and writes one markdown file. A study not
run yet is listed with the command that runs it, so the document never shows a figure nobody measured.

Verdicts compare an interval with the paper's direction: *reproduced* when the 95% interval lies on the
paper's side of zero, *reversed* when it lies on the other side, *not reproduced* when it includes zero.
"""

from harness.report.replication.common import (
    ABLATION,
    INJECTION_DISTRACTOR,
    INJECTION_OPEN,
    LADDER,
    LLMLINGUA,
    PACKING,
    PACKING_DATASETS,
    READER_BUDGETS,
    READER_IRCOT,
    TREES,
    Section,
    Settings,
    Study,
    verdict,
)
from harness.report.replication.document import SECTIONS, build_parser, main, render

__all__ = [
    "ABLATION",
    "INJECTION_DISTRACTOR",
    "INJECTION_OPEN",
    "LADDER",
    "LLMLINGUA",
    "PACKING",
    "PACKING_DATASETS",
    "READER_BUDGETS",
    "READER_IRCOT",
    "SECTIONS",
    "TREES",
    "Section",
    "Settings",
    "Study",
    "build_parser",
    "main",
    "render",
    "verdict",
]
