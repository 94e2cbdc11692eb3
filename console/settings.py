"""Django settings, all overridable from the environment.

- ``DJANGO_SECRET_KEY``, else the file ``var/secret_key`` that ``make run`` writes once (:mod:`console.secret_key`;
  never a public default), ``DEBUG`` ("1"/"true" to enable),
  ``ALLOWED_HOSTS`` (comma separated).
- ``DATABASE_URL`` (``postgres://user:pass@host:port/name``) selects PostgreSQL; otherwise SQLite at
  ``DJANGO_DB_PATH`` (default ``var/console.sqlite3`` under the repository root).
- ``BROKER_CORE_NAMESRV``: the name server address(es) the console's SDK clients use; ``BROKER_CORE_CONTROLLER``
  the controllers' (RocketMQ 5 controller mode), empty when there are none.
- Hardening (issue 14): API throttle rates, login lockout, API token lifetime, webhook allow-list and the
  Content-Security-Policy are at the end; ``console.settings_production`` is the profile for a deployment.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from csp.constants import NONE, SELF

from console.secret_key import load_secret_key

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


SECRET_KEY = load_secret_key(BASE_DIR, production=False)
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
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "django_celery_beat",
    "console.monitoring",
    "console.alerts",
    "workers",
    "django_prometheus",  # /metrics: requests, responses and latency by view, in Prometheus text format
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",  # first and last: times the whole stack
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "console.middleware.UserTimezoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "console.middleware.CSPMiddleware",  # django-csp's, its policy built once
    "console.middleware.SecurityHeadersMiddleware",
    "axes.middleware.AxesMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
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
# Seconds the topic and group lists reuse what the brokers said before asking again (console.selectors.broker_cache)
CONSOLE_BROKER_CACHE_S = float(os.environ.get("CONSOLE_BROKER_CACHE_S", "5"))
# RocketMQ 5 controller mode: the controllers' addresses (host:port;host:port, or the name server's with the
# embedded controller). Empty: no controller; the cluster page shows no election section.
BROKER_CORE_CONTROLLER = os.environ.get("BROKER_CORE_CONTROLLER", "")
# The ACL account the console's (and Celery's) SDK clients sign with, for brokers with aclEnable=true (an admin
# account of plain_acl.yml: the console creates and deletes topics and groups). Both empty: requests go unsigned.
BROKER_CORE_ACCESS_KEY = os.environ.get("BROKER_CORE_ACCESS_KEY", "")
BROKER_CORE_SECRET_KEY = os.environ.get("BROKER_CORE_SECRET_KEY", "")

# Alert notifications: Django's email backend (console by default; e.g. ...smtp.EmailBackend with EMAIL_HOST),
# and the timeout of webhook POSTs.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "broker-core-console@localhost")
ALERTS_WEBHOOK_TIMEOUT_S = float(os.environ.get("ALERTS_WEBHOOK_TIMEOUT_S", "5"))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.api.authentication.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "console.api.schema.ConsoleAutoSchema",
    "EXCEPTION_HANDLER": "console.api.errors.exception_handler",
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "console.api.negotiation.ConsoleContentNegotiation",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_CLASSES": ["console.api.throttling.AnonThrottle", "console.api.throttling.UserThrottle"],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "broker_core console API",
    "DESCRIPTION": "Topics, messages, consumer groups, dead letters and the audit log of a broker_core cluster.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the drf-spectacular-sidecar package's static files, so the docs work without internet
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # one name for the ACL permission choices both default_topic_perm and default_group_perm take
    "ENUM_NAME_OVERRIDES": {"AclPermEnum": "console.services.acl.PERMS"},
}


# Celery (workers/celery.py reads every CELERY_* setting): Redis from the environment.
CELERY_BROKER_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", CELERY_BROKER_URL)
CELERY_TIMEZONE = os.environ.get("TZ", "UTC")
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TASK_ACKS_LATE = True
# Spark jobs (search, trace) run on workers consuming the "spark" queue (Procfile's spark worker), so a long scan
# never blocks the scheduled jobs; results (JSON lines, CSV, trace.json) go to SPARK_RESULTS_URI/<job id>/.
CELERY_TASK_ROUTES = {"workers.spark_*": {"queue": "spark"}}
# Where the spark workers write the jobs' results: a local path or file:// URI (of the spark worker's host), or any
# Hadoop filesystem URI (hdfs://, s3a://, ...; written and read through the worker's SparkSession, with
# SPARK_CONF_* for the filesystem's settings). Only spark workers open it: the console asks one (the
# workers.spark_results_* tasks) and waits SPARK_RESULTS_TIMEOUT_S for the answer (then a 504). Every spark worker
# must see the same results (one host, or a shared URI). SPARK_RESULTS_DIR is the older name, still the default.
SPARK_RESULTS_DIR = Path(os.environ.get("SPARK_RESULTS_DIR", BASE_DIR / "var" / "spark-results"))
SPARK_RESULTS_URI = os.environ.get("SPARK_RESULTS_URI") or str(SPARK_RESULTS_DIR)
SPARK_RESULTS_TIMEOUT_S = float(os.environ.get("SPARK_RESULTS_TIMEOUT_S", "30"))
SPARK_RESULTS_EXPORT_CHUNK_BYTES = int(os.environ.get("SPARK_RESULTS_EXPORT_CHUNK_BYTES", str(1024 * 1024)))
# Adaptive execution: a job whose snapshots hold fewer bytes than this runs in the worker process with the same
# transforms and no Spark (Spark's start-up and scheduling would cost more than the scan); 0 always uses Spark.
SPARK_LOCAL_THRESHOLD_BYTES = int(os.environ.get("SPARK_LOCAL_THRESHOLD_BYTES", str(64 * 1024 * 1024)))
# Segment reads: "auto" opens a snapshot's files where they are visible and fetches them from the broker over the
# network (READ_SNAPSHOT_SEGMENT) where not; "network" always fetches (a Spark cluster on other hosts).
SPARK_SEGMENT_READS = os.environ.get("SPARK_SEGMENT_READS", "auto")
# DLQ resend jobs (console/jobs/resend.py) run on the default queue. A run holds its job by a lease renewed after
# each chunk of DLQ_RESEND_CHUNK dead letters; a lease older than DLQ_RESEND_LEASE_S may be taken over. A copy left
# by a killed run is looked for from DLQ_RESEND_CLOCK_SKEW_S before its intent (the broker's clock may lag ours).
DLQ_RESEND_CHUNK = int(os.environ.get("DLQ_RESEND_CHUNK", "16"))
DLQ_RESEND_LEASE_S = float(os.environ.get("DLQ_RESEND_LEASE_S", "60"))
DLQ_RESEND_CLOCK_SKEW_S = float(os.environ.get("DLQ_RESEND_CLOCK_SKEW_S", "60"))
# Test hook, 0 (off) in production: after this many chunks were sent, the run blocks before recording the last
# one, so a kill test lands in the window between a send and its record.
DLQ_RESEND_TEST_HANG_AFTER_CHUNKS = int(os.environ.get("DLQ_RESEND_TEST_HANG_AFTER_CHUNKS", "0"))


# ---- Hardening (issue 14) ------------------------------------------------------------------------------------------
def _rate(name: str, default: str) -> str | None:
    """A DRF rate (``"100/min"``) from the environment; ``off`` / ``none`` / empty turns that throttle off."""
    value = os.environ.get(name, default).strip()
    return None if value.lower() in {"", "off", "none", "0"} else value


# DRF throttles (console.api.throttling reads these per request, so tests can change them).
CONSOLE_API_THROTTLE_RATES = {"anon": _rate("CONSOLE_API_THROTTLE_ANON", "60/min"),
                              "user": _rate("CONSOLE_API_THROTTLE_USER", "6000/min")}
# Login lockout (django-axes): after CONSOLE_LOGIN_FAILURE_LIMIT failures for one username from one address, that
# pair is refused for CONSOLE_LOGIN_COOLOFF_MINUTES; a successful login resets the count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("CONSOLE_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("CONSOLE_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_DISABLE_ACCESS_LOG = True  # the console's audit log records every login
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# API tokens: lifetime of a new token in days (0: never expires).
CONSOLE_API_TOKEN_TTL_DAYS = int(os.environ.get("CONSOLE_API_TOKEN_TTL_DAYS", "90"))
# Verified API tokens are kept in each process this many seconds (0: off). Saving or deleting a token or user clears
# that process's cache at once; other processes see a revocation or deactivation within these seconds.
CONSOLE_API_TOKEN_CACHE_SECONDS = float(os.environ.get("CONSOLE_API_TOKEN_CACHE_SECONDS", "5"))
# Alert webhooks may not target loopback, private, link-local or other non-public addresses unless listed here:
# comma-separated host names, IP addresses or CIDR networks (e.g. "127.0.0.1,10.1.0.0/16,hooks.internal").
CONSOLE_WEBHOOK_ALLOWED_HOSTS = [h.strip() for h in os.environ.get("CONSOLE_WEBHOOK_ALLOWED_HOSTS", "").split(",")
                                 if h.strip()]
# Content-Security-Policy (django-csp): only the console's own scripts, styles and images.
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {
    "default-src": [SELF], "script-src": [SELF], "style-src": [SELF], "img-src": [SELF, "data:"],
    "font-src": [SELF], "connect-src": [SELF], "object-src": [NONE], "base-uri": [SELF],
    "frame-ancestors": [NONE], "form-action": [SELF]}}
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
