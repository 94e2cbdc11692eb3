"""DLQ resend as a tracked Celery job (issue 14): the lease of a resend job's run (``Job.worker``,
``Job.heartbeat``) and the idempotency records of resent dead letters (``ResendRecord``)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('console', '0006_security'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='worker',
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name='job',
            name='heartbeat',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name='ResendRecord',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('group', models.CharField(max_length=255)),
                ('offset_msg_id', models.CharField(max_length=32)),
                ('generation', models.PositiveIntegerField(default=1)),
                ('state', models.CharField(choices=[('intent', 'intent'), ('sent', 'sent')], default='intent',
                                           max_length=8)),
                ('topic', models.CharField(blank=True, max_length=255)),
                ('origin_msg_id', models.CharField(blank=True, max_length=64)),
                ('keys', models.TextField(blank=True)),
                ('new_msg_id', models.CharField(blank=True, max_length=64)),
                ('new_offset_msg_id', models.CharField(blank=True, max_length=32)),
                ('recovered', models.BooleanField(default=False)),
                ('intent_at', models.DateTimeField()),
                ('claimed_at', models.DateTimeField()),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                          related_name='resend_records', to='console.job')),
            ],
            options={
                'indexes': [models.Index(fields=['group', 'offset_msg_id'], name='console_resend_msg')],
                'constraints': [
                    models.UniqueConstraint(fields=('group', 'offset_msg_id', 'generation'),
                                            name='console_resend_once_per_generation'),
                    models.UniqueConstraint(condition=models.Q(('state', 'intent')), fields=('group', 'offset_msg_id'),
                                            name='console_resend_one_intent'),
                ],
            },
        ),
    ]
