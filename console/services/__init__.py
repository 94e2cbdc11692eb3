"""Writes: every change goes through a service, which calls the broker and records an :class:`AuditEvent`."""
