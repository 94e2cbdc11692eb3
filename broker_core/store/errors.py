"""Store errors: broken invariants and unusable store directories. Expected outcomes are result enums."""

from __future__ import annotations


class StoreError(RuntimeError):
    """A broken store invariant; the message names the file and, where known, the position."""


class StoreLockedError(StoreError):
    """Another process holds the store directory's ``lock`` file."""
