"""Celery worker and beat: the clock for the broker's maintenance (retention, disk checks, delay-level
delivery, sampling). Tasks are thin: each calls one service and records a run."""
