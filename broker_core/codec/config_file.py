"""RocketMQ's config files (``<store>/config/*.json``, reference §7.5): how they are written and read.

Writing (``MixAll.string2File``): the new text goes to ``<f>.tmp`` (fsynced), the previous content is copied to
``<f>.bak`` (fsynced), ``.tmp`` is renamed over ``<f>`` and the directory is fsynced (a directory created for
the file is fsynced in its parent first). A crash or a power loss leaves either the old or the new ``<f>``, never
a torn one, and ``<f>.bak`` holds the version before. A failed write or fsync raises ``OSError`` to the caller.

Reading (``ConfigManager.load``): a missing, empty or unparsable ``<f>`` falls back to ``<f>.bak``; when
neither is usable the caller starts from its defaults. Text is parsed with :func:`loads_fastjson`, so files
written by Java (unquoted integer keys, tabs) and the standard JSON written by earlier versions of this
product both load.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from broker_core.codec.fastjson import loads_fastjson

log = logging.getLogger(__name__)


def _write_synced(path: Path, raw: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _make_dirs(path: Path) -> None:
    """``mkdir -p`` with each new directory's name made durable (its parent fsynced)."""
    if path.is_dir():
        return
    _make_dirs(path.parent)
    try:
        path.mkdir()
    except FileExistsError:
        return
    _fsync_dir(path.parent)


def write_config_file(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` as RocketMQ does (``.tmp``, then the old content to ``.bak``)."""
    _make_dirs(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    _write_synced(tmp, text.encode("utf-8"))
    try:
        old = path.read_bytes()
    except FileNotFoundError:
        old = None
    if old:
        _write_synced(path.with_name(path.name + ".bak"), old)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_config_file(path: Path) -> Any | None:
    """The parsed content of ``path``, else of ``path.bak``; None when neither holds a JSON value."""
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        if not text.strip():
            log.warning("config file %s is empty", candidate)
            continue
        try:
            return loads_fastjson(text)
        except ValueError as exc:
            log.error("config file %s is not valid JSON (%s); trying its backup", candidate, exc)
    return None
