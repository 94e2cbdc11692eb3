"""Errors raised when bytes do not match a format."""

from __future__ import annotations


class CodecError(ValueError):
    """Bytes that do not decode. Names the source (usually a file path) and the byte position."""

    def __init__(self, reason: str, source: str | None = None, position: int | None = None) -> None:
        self.reason = reason
        self.source = source
        self.position = position
        where = []
        if source is not None:
            where.append(f"file {source}")
        if position is not None:
            where.append(f"position {position}")
        super().__init__(f"{reason} ({', '.join(where)})" if where else reason)
