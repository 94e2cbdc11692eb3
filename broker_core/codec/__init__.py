"""Every binary format of the broker: the single source of truth for bytes.

stdlib only, no file or network I/O. Functions read from and write into buffers the caller owns.
All integers are big-endian (Java ``ByteBuffer`` defaults), as in RocketMQ.
"""

from broker_core.codec.errors import CodecError

__all__ = ["CodecError"]
