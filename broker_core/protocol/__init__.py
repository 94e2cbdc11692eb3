"""The broker protocol, sans-I/O: request and response codes, commands, frame decoding, validation.

Shared by the server (``broker_core.server``), the name server and the clients. Nothing here touches
sockets or files; byte layouts live in ``broker_core.codec.wire``.
"""

from broker_core.protocol.codes import RequestCode, ResponseCode
from broker_core.protocol.command import FrameDecoder, ProtocolError, RemotingCommand
from broker_core.protocol.fields import BadRequest

__all__ = ["BadRequest", "FrameDecoder", "ProtocolError", "RemotingCommand", "RequestCode", "ResponseCode"]
