"""Alerts: rules over the sampled history (lag in messages or seconds, DLQ growth, disk ratio) and the name
server's broker list (a broker missing), the alerts they open and resolve, and the notifications sent for them
by email and webhook. Evaluated by the ``workers.evaluate_alerts`` task (:mod:`console.alerts.services`)."""
