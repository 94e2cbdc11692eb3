"""The production profile passes ``manage.py check --deploy --fail-level WARNING`` and refuses to start without a
real SECRET_KEY; ``ensure_secret_key`` writes one once (mode 0600) and the settings read it."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def _manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in {"DJANGO_SECRET_KEY", "SECRET_KEY", "DEBUG", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    full = {**base, "PYTHONPATH": str(ROOT), "DJANGO_DB_PATH": str(tmp_path / "db.sqlite3"),
            "DJANGO_SECRET_KEY_FILE": str(tmp_path / "var" / "secret_key"), **env}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=full, capture_output=True, text=True,
                          timeout=300)


def test_check_deploy_is_clean_for_the_production_profile(tmp_path: Path) -> None:
    out = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING",
                  DJANGO_SETTINGS_MODULE="console.settings_production", DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
                  ALLOWED_HOSTS="console.example.com")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no issues" in out.stdout


def test_check_deploy_fails_for_the_development_settings(tmp_path: Path) -> None:
    out = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING",
                  DJANGO_SETTINGS_MODULE="console.settings")
    assert out.returncode != 0 and "security.W004" in out.stderr + out.stdout  # HSTS, among others


def test_production_refuses_to_start_without_a_real_key(tmp_path: Path) -> None:
    missing = _manage(tmp_path, "check", DJANGO_SETTINGS_MODULE="console.settings_production")
    assert missing.returncode != 0 and "no SECRET_KEY" in missing.stderr
    weak = _manage(tmp_path, "check", DJANGO_SETTINGS_MODULE="console.settings_production",
                   DJANGO_SECRET_KEY="dev-only-insecure-key-change-me")
    assert weak.returncode != 0 and "too weak" in weak.stderr


def test_ensure_secret_key_writes_the_key_once_and_the_settings_use_it(tmp_path: Path) -> None:
    key_file = tmp_path / "var" / "secret_key"
    first = _manage(tmp_path, "ensure_secret_key")
    assert first.returncode == 0 and "wrote a new SECRET_KEY" in first.stdout, first.stderr
    key = key_file.read_text().strip()
    assert len(key) >= 50 and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert _manage(tmp_path, "ensure_secret_key").stdout == "" and key_file.read_text().strip() == key
    show = "from django.conf import settings; print(settings.SECRET_KEY)"
    assert _manage(tmp_path, "shell", "-c", show).stdout.strip().splitlines()[-1] == key
    prod = _manage(tmp_path, "shell", "-c", show, DJANGO_SETTINGS_MODULE="console.settings_production")
    assert prod.stdout.strip().splitlines()[-1] == key, prod.stderr
    from_env = _manage(tmp_path, "shell", "-c", show, DJANGO_SECRET_KEY="k" * 60)
    assert from_env.stdout.strip().splitlines()[-1] == "k" * 60  # the environment wins over the file
