"""Monitoring records the console shows and the Celery workers write: scheduled job runs and the sampled
history (lag, topic rates, broker disk) behind the dashboard's charts and the alert rules."""
