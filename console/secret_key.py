"""The console's ``SECRET_KEY``: from the environment, else a file made once under ``var/``.

Order: ``DJANGO_SECRET_KEY`` (or the older ``SECRET_KEY``) in the environment, then the file
``DJANGO_SECRET_KEY_FILE`` (default ``var/secret_key``). ``make run`` creates that file with
``manage.py ensure_secret_key`` before anything starts, so every process of one installation (web workers,
Celery) signs with the same key and sessions survive restarts.

Invariants:
1. The file is created with ``O_CREAT | O_EXCL`` and mode 0600, written and fsynced before it is visible under its
   name (written to a temp name, then hard-linked into place), so two processes racing to create it agree on one
   key and no reader sees a half-written one.
2. There is no public default: without a key the development profile signs with a random per-process key (sessions
   end with the process), and the production profile refuses to start (:func:`load_secret_key`).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

MIN_LENGTH = 50  # what ``check --deploy`` (security.W009) asks for
ENV_NAMES = ("DJANGO_SECRET_KEY", "SECRET_KEY")


def key_file(base_dir: Path) -> Path:
    return Path(os.environ.get("DJANGO_SECRET_KEY_FILE", base_dir / "var" / "secret_key"))


def read_key_file(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return text or None


def ensure_key_file(path: Path) -> bool:
    """Create ``path`` with a new random key unless it exists; True when this call created it."""
    if read_key_file(path) is not None:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (secrets.token_urlsafe(64) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if another process got there first: its key wins
        created = True
    except FileExistsError:
        created = False
    finally:
        tmp.unlink()
    if created:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return created


def load_secret_key(base_dir: Path, *, production: bool) -> str:
    """The key to sign with (see the module docstring); raises ImproperlyConfigured in production without a
    real one (missing, or shorter than :data:`MIN_LENGTH`)."""
    key = next((os.environ[n].strip() for n in ENV_NAMES if os.environ.get(n, "").strip()), None)
    if key is None:
        key = read_key_file(key_file(base_dir))
    if production:
        if key is None:
            raise ImproperlyConfigured("no SECRET_KEY: set DJANGO_SECRET_KEY or run `manage.py ensure_secret_key` "
                                       f"(it writes {key_file(base_dir)})")
        if len(key) < MIN_LENGTH or len(set(key)) < 5 or key.startswith("django-insecure-"):
            raise ImproperlyConfigured(f"SECRET_KEY is too weak for production (use {MIN_LENGTH}+ random characters)")
    return key if key is not None else secrets.token_urlsafe(64)
