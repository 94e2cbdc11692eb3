"""The broker process: an asyncio server over the MessageStore (produce, consume, admin handlers),
topic/offset/subscription state persisted as JSON under the store's ``config/`` directory, long polling
and registration with name servers."""
