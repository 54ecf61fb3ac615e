"""What a run writes while it runs: the row journal, the run's outputs, the W&B logger.

Cross-run analysis (tables, plots) lives in :mod:`harness.report`; neither package enters the run key.
"""
