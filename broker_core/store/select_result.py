"""SelectMappedBufferResult: a reader's held view into one mapped segment.

Invariant: while the result is held, its segment's mapping stays (``MappedFile.hold()`` counted it); ``release()``
drops the view and the hold exactly once, and a use after release fails loudly (the segment reference is gone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker_core.store.mapped_file import MappedFile


class SelectMappedBufferResult:
    """A held view into a segment. ``start_offset`` is the global offset of ``buffer[0]``."""

    __slots__ = ("buffer", "mapped_file", "start_offset")

    def __init__(self, start_offset: int, buffer: memoryview, mapped_file: MappedFile) -> None:
        self.start_offset = start_offset
        self.buffer = buffer
        self.mapped_file = mapped_file

    @property
    def size(self) -> int:
        return len(self.buffer)

    def release(self) -> None:
        if self.mapped_file is not None:
            self.buffer.release()
            self.mapped_file.release()
            self.mapped_file = None  # type: ignore[assignment]  # released: a use after this must fail loudly

    def __enter__(self) -> SelectMappedBufferResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
