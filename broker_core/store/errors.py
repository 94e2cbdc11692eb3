"""Store errors: broken invariants and unusable store directories (defined in :mod:`broker_core.errors`).
Expected outcomes are result enums."""

from __future__ import annotations

from broker_core.errors import StoreError, StoreLockedError

__all__ = ["StoreError", "StoreLockedError"]
