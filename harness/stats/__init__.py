"""Statistics over per-question result rows: bootstrap intervals and paired comparisons."""

from harness.stats.bootstrap import bootstrap_mean_ci, clustered_bootstrap, paired_bootstrap, summarize_columns

__all__ = ["bootstrap_mean_ci", "clustered_bootstrap", "paired_bootstrap", "summarize_columns"]
