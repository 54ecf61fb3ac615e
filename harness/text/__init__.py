"""Text utilities shared by the stages: sentence splitting, token counting, chunking, HTML to paragraphs."""
