"""Job statuses for Spark jobs: cancelling (asked by the console) and cancelled (stopped by the worker)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('console', '0004_user_preference'),
    ]

    operations = [
        migrations.AlterField(
            model_name='job',
            name='status',
            field=models.CharField(choices=[('pending', 'pending'), ('running', 'running'), ('done', 'done'), ('failed', 'failed'), ('cancelling', 'cancelling'), ('cancelled', 'cancelled')], db_index=True, default='pending', max_length=16),
        ),
    ]
