"""Console hardening (issue 14): hashed API tokens with expiry and last use.

``ApiToken`` keeps the SHA-256 of a key, never the key. Existing DRF authtoken keys (the ``authtoken_token``
table, when an older console created it) are moved over, hashed, with an expiry of
``CONSOLE_API_TOKEN_TTL_DAYS`` from now; their plaintext rows are deleted. The table is read with SQL because the
``rest_framework.authtoken`` app is no longer installed.
"""

import hashlib
from datetime import timedelta

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

LEGACY_TABLE = "authtoken_token"
PREFIX_CHARS = 8  # console.services.tokens.PREFIX_CHARS at the time of this migration


def hash_legacy_tokens(apps, schema_editor):  # type: ignore[no-untyped-def]
    connection = schema_editor.connection
    if LEGACY_TABLE not in connection.introspection.table_names():
        return
    api_token = apps.get_model("console", "ApiToken")
    ttl_days = int(getattr(settings, "CONSOLE_API_TOKEN_TTL_DAYS", 90))
    expires = timezone.now() + timedelta(days=ttl_days) if ttl_days > 0 else None
    quoted = connection.ops.quote_name(LEGACY_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id, created FROM {quoted}")
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        token = api_token.objects.create(user_id=user_id, key_prefix=key[:PREFIX_CHARS],
                                         key_hash=hashlib.sha256(key.encode()).hexdigest(), expires=expires)
        api_token.objects.filter(pk=token.pk).update(created=created)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {quoted}")


class Migration(migrations.Migration):

    dependencies = [
        ('console', '0005_job_cancel_statuses'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key_prefix', models.CharField(db_index=True, max_length=16)),
                ('key_hash', models.CharField(max_length=64, unique=True)),
                ('created', models.DateTimeField(auto_now_add=True)),
                ('expires', models.DateTimeField(blank=True, null=True)),
                ('last_used', models.DateTimeField(blank=True, null=True)),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='api_token',
                                              to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.RunPython(hash_legacy_tokens, migrations.RunPython.noop),
    ]
