"""The records, interfaces and process-wide services every stage builds on; imports no other harness package."""
