"""Django settings, all overridable from the environment.

- ``SECRET_KEY`` (a development default is used when unset), ``DEBUG`` ("1"/"true" to enable),
  ``ALLOWED_HOSTS`` (comma separated).
- ``DATABASE_URL`` (``postgres://user:pass@host:port/name``) selects PostgreSQL; otherwise SQLite at
  ``DJANGO_DB_PATH`` (default ``var/console.sqlite3`` under the repository root).
- ``BROKER_CORE_NAMESRV``: the name server address(es) the console's SDK clients use.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    """``name`` from the environment as a boolean ("1", "true", "yes", "on" are true)."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def database_from_url(url: str) -> dict[str, Any]:
    """A Django ``DATABASES`` entry from a ``postgres://``, ``postgresql://`` or ``sqlite:///`` URL."""
    parts = urlsplit(url)
    if parts.scheme in {"postgres", "postgresql", "pgsql"}:
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
        }
    if parts.scheme == "sqlite":
        # sqlite:///relative.db and sqlite:////absolute/path.db, as dj-database-url reads them
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": unquote(parts.path[1:]) or ":memory:"}
    raise ValueError(f"unsupported DATABASE_URL scheme {parts.scheme!r}")


SECRET_KEY = os.environ.get("SECRET_KEY", "dev-only-insecure-key-change-me")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()]

INSTALLED_APPS = [
    "console",  # first: its runserver (TCP_NODELAY) overrides staticfiles'
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_celery_beat",
    "console.monitoring",
    "console.alerts",
    "workers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "console.middleware.UserTimezoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": database_from_url(os.environ["DATABASE_URL"])}
else:
    _db_path = Path(os.environ.get("DJANGO_DB_PATH", BASE_DIR / "var" / "console.sqlite3"))
    _db_path.parent.mkdir(parents=True, exist_ok=True)
    # WAL: readers never wait for the writer, and a commit appends to the log instead of rewriting the journal
    # (synchronous=NORMAL: durable at checkpoints; a power cut may lose the last commits, never corrupt).
    # IMMEDIATE transactions take the write lock up front, so concurrent web/worker/beat processes wait for it
    # (up to ``timeout`` s) instead of failing with "database is locked" on a lock upgrade.
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(_db_path), "OPTIONS": {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE", "timeout": 20}}}
# Keep each thread's database connection between requests (opening one, with the PRAGMAs above, cost about a
# third of a millisecond per request); checked before reuse, so a dropped PostgreSQL connection is reopened.
DATABASES["default"].update(CONN_MAX_AGE=int(os.environ.get("CONN_MAX_AGE", "60")), CONN_HEALTH_CHECKS=True)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# A produce request may carry several messages of up to 4 MiB each (base64 grows them by a third).
DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024 * 1024

BROKER_CORE_NAMESRV = os.environ.get("BROKER_CORE_NAMESRV", "127.0.0.1:9876")
BROKER_CORE_PRODUCER_GROUP = os.environ.get("BROKER_CORE_PRODUCER_GROUP", "broker_core_console")
BROKER_CORE_TIMEOUT_S = float(os.environ.get("BROKER_CORE_TIMEOUT_S", "5"))

# Alert notifications: Django's email backend (console by default; e.g. ...smtp.EmailBackend with EMAIL_HOST),
# and the timeout of webhook POSTs.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "broker-core-console@localhost")
ALERTS_WEBHOOK_TIMEOUT_S = float(os.environ.get("ALERTS_WEBHOOK_TIMEOUT_S", "5"))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "console.api.schema.ConsoleAutoSchema",
    "EXCEPTION_HANDLER": "console.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "broker_core console API",
    "DESCRIPTION": "Topics, messages, consumer groups, dead letters and the audit log of a broker_core cluster.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}


# Celery (workers/celery.py reads every CELERY_* setting): Redis from the environment.
CELERY_BROKER_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", CELERY_BROKER_URL)
CELERY_TIMEZONE = os.environ.get("TZ", "UTC")
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TASK_ACKS_LATE = True
# Spark jobs (search, trace) run on workers consuming the "spark" queue (Procfile's spark worker), so a long scan
# never blocks the scheduled jobs; results (JSON lines, CSV, trace.json) go to SPARK_RESULTS_DIR/<job id>/.
CELERY_TASK_ROUTES = {"workers.spark_*": {"queue": "spark"}}
SPARK_RESULTS_DIR = Path(os.environ.get("SPARK_RESULTS_DIR", BASE_DIR / "var" / "spark-results"))
