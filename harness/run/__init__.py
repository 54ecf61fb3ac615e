"""One evaluation run: the stage order, what jobs of one process share, sweep composition and the config check."""
