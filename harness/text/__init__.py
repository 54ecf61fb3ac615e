"""Text utilities shared by the stages: sentence splitting, token counting and chunking."""
