"""Summary trees over long documents: none (dense baseline), RAPTOR and the query-driven DTCRS."""
