"""Budgeted-RAG evaluation harness."""

__version__ = "0.1.0"
