"""asyncio transport for the protocol: a server that dispatches commands to handlers, and a client that
multiplexes many requests over one connection per address (request ids)."""
