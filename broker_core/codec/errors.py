"""Errors raised when bytes do not match a format (defined in :mod:`broker_core.errors`)."""

from __future__ import annotations

from broker_core.errors import CodecError

__all__ = ["CodecError"]
