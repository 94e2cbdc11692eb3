"""The production profile: ``DJANGO_SETTINGS_MODULE=console.settings_production``.

Everything in :mod:`console.settings`, plus what Django's deployment checklist asks for, so
``manage.py check --deploy --fail-level WARNING`` is clean:

- a real ``SECRET_KEY`` (``DJANGO_SECRET_KEY`` or ``var/secret_key``; the process refuses to start without one);
- ``DEBUG`` off whatever the environment says;
- HTTPS only: SSL redirect, HSTS (a year, subdomains, preload), secure and HTTP-only cookies. Behind a TLS-ending
  proxy set ``SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto`` (the proxy must set that header itself).
"""

from __future__ import annotations

import os

from console.secret_key import load_secret_key
from console.settings import *  # noqa: F403 - a profile extends the base settings
from console.settings import BASE_DIR, env_bool

SECRET_KEY = load_secret_key(BASE_DIR, production=True)
DEBUG = False

SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", str(365 * 24 * 3600)))
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
CSRF_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
if os.environ.get("SECURE_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + os.environ["SECURE_PROXY_SSL_HEADER"].upper().replace("-", "_"), "https")
