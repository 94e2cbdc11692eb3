"""Where the console's Spark jobs keep their result files: a results URI, one directory per job.

``open_store(uri, session)`` picks the backend by the URI's scheme:

- a plain path or ``file://`` URI: :class:`LocalStore`, Python file IO under that directory;
- any other scheme (``hdfs://``, ``s3a://``, ``abfs://``, a scheme mapped with ``spark.hadoop.fs.<scheme>.impl``):
  :class:`HadoopStore`, Hadoop's ``FileSystem`` API through the JVM of ``session()`` (a SparkSession, built on first
  use), so results land wherever the Spark cluster writes and need no path the Python process can open.

A job's files are ``<uri>/<job id>/<name>``. Writers and readers are buffered binary streams: writing streams
(a buffer of :data:`BUFFER_BYTES` at most is held, never a whole file) and reading seeks.

Invariants:

1. The store never decides when results are complete: the job's row turns ``done`` only after every writer of
   the job is closed, and readers are asked only for ``done`` jobs. A file seen by a reader is therefore whole.
2. Files are written in place (no temporary name and rename: object stores have no atomic rename). A worker that
   crashes mid-write leaves a partial directory under a job that is ``running`` (then ``failed``); it is never
   read, and :meth:`ResultsStore.delete` removes it before the job id is written again.
3. A missing file is :class:`ResultMissing` (a ``FileNotFoundError``) from every backend, never a backend error.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import unquote, urlsplit

BUFFER_BYTES = 1 << 20  # the write buffer, and the largest single transfer through py4j


class ResultMissing(FileNotFoundError):
    """A job's result file does not exist (never written, deleted, or the results URI changed since)."""


class ResultsStore(Protocol):
    """A results URI's files: ``create`` / ``open`` / ``size`` / ``delete`` by job id and file name."""

    uri: str

    def location(self, job_id: int, name: str) -> str:
        """The file's path or URI, as recorded on the job."""
        ...

    def create(self, job_id: int, name: str) -> BinaryIO:
        """A buffered binary writer of a new (or truncated) file; close it to finish the file."""
        ...

    def open(self, job_id: int, name: str) -> BinaryIO:
        """A buffered, seekable binary reader; :class:`ResultMissing` when the file does not exist."""
        ...

    def size(self, job_id: int, name: str) -> int:
        """The file's length in bytes; :class:`ResultMissing` when it does not exist."""
        ...

    def delete(self, job_id: int) -> bool:
        """Remove the job's directory and everything in it; False when there was none."""
        ...


def is_local(uri: str) -> bool:
    """True for a plain path or a ``file://`` URI (Python file IO), False for a Hadoop filesystem URI."""
    scheme = urlsplit(str(uri)).scheme
    return scheme in ("", "file") or len(scheme) == 1  # one letter: a Windows drive, not a scheme


def _local_path(uri: str) -> Path:
    parts = urlsplit(str(uri))
    if parts.scheme != "file":
        return Path(uri)
    if parts.netloc not in ("", "localhost"):
        raise ValueError(f"a file:// results URI must name a local path, not host {parts.netloc!r}: {uri}")
    return Path(unquote(parts.path))


def _job_dir(job_id: int) -> str:
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 0:
        raise ValueError(f"not a job id: {job_id!r}")
    return str(job_id)


def _file_name(name: str) -> str:
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(f"not a result file name: {name!r}")
    return name


class LocalStore:
    """A results directory on this host (see the module docstring)."""

    def __init__(self, uri: str) -> None:
        self.uri = str(uri)
        self.root = _local_path(uri)

    def _path(self, job_id: int, name: str) -> Path:
        return self.root / _job_dir(job_id) / _file_name(name)

    def location(self, job_id: int, name: str) -> str:
        return str(self._path(job_id, name))

    def create(self, job_id: int, name: str) -> BinaryIO:
        path = self._path(job_id, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "wb", buffering=BUFFER_BYTES)

    def open(self, job_id: int, name: str) -> BinaryIO:
        try:
            return open(self._path(job_id, name), "rb", buffering=BUFFER_BYTES)
        except FileNotFoundError:
            raise ResultMissing(self.location(job_id, name)) from None

    def size(self, job_id: int, name: str) -> int:
        try:
            return self._path(job_id, name).stat().st_size
        except FileNotFoundError:
            raise ResultMissing(self.location(job_id, name)) from None

    def delete(self, job_id: int) -> bool:
        import shutil

        path = self.root / _job_dir(job_id)
        if not path.exists():
            return False
        shutil.rmtree(path)
        return True


class _JavaOutput(io.RawIOBase):
    """A Java ``OutputStream`` as a raw Python stream (each ``write`` is one py4j call: buffer in front)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        if data:
            self._stream.write(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                self._stream.close()
            finally:
                super().close()


class _JavaInput(io.RawIOBase):
    """A Hadoop ``FSDataInputStream`` as a raw, seekable Python stream (``readNBytes``: one py4j call a read)."""

    def __init__(self, stream: Any, length: int) -> None:
        self._stream, self._length, self._pos = stream, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        want = min(len(b), BUFFER_BYTES, max(0, self._length - self._pos))
        if want <= 0:
            return 0
        data = bytes(self._stream.readNBytes(want))
        b[:len(data)] = data
        self._pos += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._length}[whence]
        pos = max(0, base + offset)
        self._stream.seek(min(pos, self._length))
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if not self.closed:
            try:
                self._stream.close()
            finally:
                super().close()


class HadoopStore:
    """A results URI on a Hadoop filesystem, reached through a SparkSession's JVM (see the module docstring).

    Paths are handed to the filesystem without scheme and authority (``Path.getPathWithoutSchemeAndAuthority``):
    the filesystem object already belongs to the URI's scheme and authority, and an implementation registered for
    another scheme (``fs.<scheme>.impl``) would otherwise refuse the path as a "Wrong FS"."""

    def __init__(self, uri: str, session: Callable[[], Any]) -> None:
        self.uri = str(uri).rstrip("/")
        self._session = session
        self._fs: Any = None

    def _jvm_fs(self) -> tuple[Any, Any]:
        spark = self._session()
        hadoop_path = spark._jvm.org.apache.hadoop.fs.Path
        if self._fs is None:
            self._fs = hadoop_path(self.uri).getFileSystem(spark._jsc.hadoopConfiguration())
        return self._fs, hadoop_path

    def _path(self, *parts: str) -> tuple[Any, Any]:
        fs, hadoop_path = self._jvm_fs()
        full = "/".join([self.uri, *parts])
        return fs, hadoop_path.getPathWithoutSchemeAndAuthority(hadoop_path(full))

    def location(self, job_id: int, name: str) -> str:
        return f"{self.uri}/{_job_dir(job_id)}/{_file_name(name)}"

    def create(self, job_id: int, name: str) -> BinaryIO:
        fs, path = self._path(_job_dir(job_id), _file_name(name))
        raw = _JavaOutput(fs.create(path, True))  # overwrite; parents are created
        return io.BufferedWriter(raw, buffer_size=BUFFER_BYTES)

    def open(self, job_id: int, name: str) -> BinaryIO:
        fs, path = self._path(_job_dir(job_id), _file_name(name))
        if not fs.exists(path):
            raise ResultMissing(self.location(job_id, name))
        length = int(fs.getFileStatus(path).getLen())
        raw = _JavaInput(fs.open(path), length)
        return io.BufferedReader(raw, buffer_size=BUFFER_BYTES)

    def size(self, job_id: int, name: str) -> int:
        fs, path = self._path(_job_dir(job_id), _file_name(name))
        if not fs.exists(path):
            raise ResultMissing(self.location(job_id, name))
        return int(fs.getFileStatus(path).getLen())

    def delete(self, job_id: int) -> bool:
        fs, path = self._path(_job_dir(job_id))
        if not fs.exists(path):
            return False
        return bool(fs.delete(path, True))


def open_store(uri: str, session: Callable[[], Any] | None = None) -> ResultsStore:
    """The store of ``uri``: local for a path or ``file://``, else Hadoop through ``session()`` (required then)."""
    if is_local(uri):
        return LocalStore(uri)
    if session is None:
        raise ValueError(f"the results URI {uri} is a Hadoop filesystem URI: it needs a SparkSession")
    return HadoopStore(uri, session)
