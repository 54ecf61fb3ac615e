"""Budgeted-RAG evaluation harness."""
