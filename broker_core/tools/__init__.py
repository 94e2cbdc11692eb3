"""Command-line tools over a store directory (read-only)."""
