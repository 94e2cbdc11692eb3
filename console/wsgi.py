"""WSGI entry point (``granian --interface wsgi console.wsgi:application``, as the Procfile's web line serves the
console; ``gunicorn console.wsgi:application`` serves it as well).

The console's own CSS/JS under ``STATIC_URL`` are served by Django's static files handler, as runserver does
(``CONSOLE_SERVE_STATIC=0`` turns that off when a front server serves ``collectstatic``'s output).
"""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
application = get_wsgi_application()

if os.environ.get("CONSOLE_SERVE_STATIC", "1").strip().lower() not in {"0", "false", "no", "off"}:
    from django.contrib.staticfiles.handlers import StaticFilesHandler

    application = StaticFilesHandler(application)
