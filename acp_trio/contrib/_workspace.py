"""Serving ``fs/read_text_file`` and ``fs/write_text_file`` safely (POSIX).

:class:`WorkspaceFiles` answers an agent's file requests from the disk, only
inside the directories the application names (its *roots*):

- The path must be absolute. It is resolved (symlinks, ``..``) and the result
  must lie inside a root; a symlink, or a symlinked parent directory, that
  points out of the roots is refused like any other outside path.
- The file is then opened by walking down from the root one component at a
  time (``openat`` with ``O_NOFOLLOW``), so a symlink swapped in after the
  check cannot redirect the open: the check and the use name the same file.
- Only regular files are read or replaced: directories, FIFOs, sockets and
  devices are refused before they are opened.
- Reads honour ``line`` (1-based) and ``limit`` (a number of lines) and are
  capped in size; the text must be UTF-8.
- Writes are atomic: the content goes to a temporary file in the same
  directory, which then replaces the target with ``rename``. A write that
  fails or is cancelled leaves the old file as it was and no temporary file.
  A missing file is created (ACP requires it); a missing directory is not,
  unless ``create_dirs=True``.

Refusals are :class:`~acp_trio.RequestError`: ``-32602`` (invalid params) for
a path that is not allowed or not a regular file, ``-32002`` (resource not
found) for a missing file or directory; ``data`` is
``{"path": ..., "reason": ...}``, with ``"roots"`` too for a path refused
because it is not inside them (or not absolute). Blocking calls run in worker threads.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable
from typing import Any, Final, NoReturn, final

import trio

from acp_trio._exceptions import ErrorCode, RequestError
from acp_trio.schema import (
    ReadTextFileRequest,
    ReadTextFileResponse,
    WriteTextFileRequest,
    WriteTextFileResponse,
)

__all__ = ["WorkspaceFiles", "WorkspaceFilesMixin"]

DEFAULT_MAX_READ_BYTES: Final = 50 * 1024 * 1024

# Content is written in chunks of this size, with a checkpoint between two:
# a long write can be cancelled.
_CHUNK: Final = 1024 * 1024

_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY: Final = getattr(os, "O_NOCTTY", 0)
_DIR_FLAGS: Final = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
_READ_FLAGS: Final = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_NOCTTY | _O_CLOEXEC
_TEMP_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def _refuse(path: str, reason: str, **extra: Any) -> NoReturn:
    raise RequestError(
        ErrorCode.INVALID_PARAMS, f"{reason}: {path}", {"path": path, "reason": reason, **extra}
    )


def _missing(path: str, reason: str = "file not found") -> NoReturn:
    raise RequestError(
        ErrorCode.RESOURCE_NOT_FOUND, f"{reason}: {path}", {"path": path, "reason": reason}
    )


def _os_error(path: str, exc: OSError) -> NoReturn:
    """Turn an OSError met while serving ``path`` into the RequestError."""
    code = exc.errno
    if code == errno.ENOENT:
        _missing(path)
    if code in (errno.EACCES, errno.EPERM):
        _refuse(path, "permission denied")
    if code == errno.ELOOP:
        # With O_NOFOLLOW on resolved components, only a symlink swapped in
        # after the check gets here.
        _refuse(path, "a path component is a symbolic link")
    if code == errno.ENOTDIR:
        _refuse(path, "a path component is not a directory")
    if code == errno.EISDIR:
        _refuse(path, "is a directory")
    if code == errno.ENAMETOOLONG:
        _refuse(path, "path too long")
    reason = exc.strerror or type(exc).__name__
    raise RequestError(
        ErrorCode.INTERNAL_ERROR, f"{reason}: {path}", {"path": path, "reason": reason}
    ) from exc


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _lines(text: str, line: int | None, limit: int | None, path: str) -> str:
    if line is None and limit is None:
        return text
    if (line is not None and line < 0) or (limit is not None and limit < 0):
        _refuse(path, "line and limit must not be negative")
    # 1-based; 0 reads as 1, as the reference clients do.
    start = max((line or 1) - 1, 0)
    stop = None if limit is None else start + limit
    # Only "\n" ends a line (not the other separators str.splitlines knows);
    # line ends are kept.
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return "".join(lines[start:stop])


class _PendingWrite:
    """The open descriptors of a write in progress; each closed once."""

    __slots__ = ("dir_fd", "fd", "name", "temp")

    def __init__(self, dir_fd: int, name: str) -> None:
        self.dir_fd = dir_fd
        self.name = name
        self.temp = ""
        self.fd = -1

    def close_file(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def close_dir(self) -> None:
        fd, self.dir_fd = self.dir_fd, -1
        if fd >= 0:
            os.close(fd)

    def abort(self) -> None:
        """Close everything and remove the temporary file (if still there).
        Never raises OSError."""
        with contextlib.suppress(OSError):
            self.close_file()
        if self.temp and self.dir_fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self.temp, dir_fd=self.dir_fd)
        with contextlib.suppress(OSError):
            self.close_dir()


@final
class WorkspaceFiles:
    """Serve an agent's file requests from inside ``roots`` only.

    ``roots`` are absolute directory paths. Use it as the body of a
    :class:`~acp_trio.Client`'s methods::

        class MyClient(acp_trio.Client):
            def __init__(self, files: acp_trio.contrib.WorkspaceFiles) -> None:
                super().__init__()
                self.files = files

            async def read_text_file(self, params):
                return await self.files.read_text_file(params)

            async def write_text_file(self, params):
                return await self.files.write_text_file(params)

    or through :class:`WorkspaceFilesMixin`. Options:

    - ``max_read_bytes``: files larger than this are refused (also with
      ``line``/``limit``), default 50 MiB;
    - ``create_dirs``: create missing parent directories (inside a root) on
      write; default ``False`` (``-32002``);
    - ``fsync``: flush the new content and the directory to disk before a
      write returns; default ``False`` (the write is atomic either way, but
      may not survive a power cut).

    POSIX only. The guarantees and their limits are in the module docs.
    """

    def __init__(
        self,
        roots: Iterable[str | os.PathLike[str]],
        *,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        create_dirs: bool = False,
        fsync: bool = False,
    ) -> None:
        checked: list[str] = []
        for root in roots:
            text = os.fspath(root)
            if not isinstance(text, str) or not os.path.isabs(text):
                raise ValueError(f"workspace roots must be absolute paths, not {root!r}")
            checked.append(os.path.normpath(text))
        if not checked:
            raise ValueError("at least one workspace root is needed")
        if max_read_bytes < 0:
            raise ValueError("max_read_bytes must not be negative")
        self._roots = tuple(checked)
        self.max_read_bytes = max_read_bytes
        self.create_dirs = create_dirs
        self.fsync = fsync

    @property
    def roots(self) -> tuple[str, ...]:
        """The roots, as given (normalized)."""
        return self._roots

    def __repr__(self) -> str:
        return f"WorkspaceFiles(roots={list(self._roots)!r})"

    # ------------------------------------------------------------------
    # Public API

    async def resolve(self, path: str) -> str:
        """The real path ``path`` names, if it lies inside a root; else
        raise the same :class:`RequestError` a request would get.

        For display or for looking up an editor buffer: the file may change
        between this check and any later use, so open files through
        :meth:`read_text_file` / :meth:`write_text_file`, not through this.
        The check runs in a worker thread; a cancellation takes effect once it
        returns.
        """
        root, parts = await trio.to_thread.run_sync(self._locate, path)
        return os.path.join(root, *parts)

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        """``fs/read_text_file``: the file's text, or the lines asked for.

        Raises :class:`RequestError`: ``-32602`` for a path outside the roots,
        not absolute, not a regular file, too large or not UTF-8, ``-32002``
        for a missing file. The read runs in a worker thread; a cancellation
        takes effect once it returns (nothing is answered then).
        """
        path = params.path
        data = await trio.to_thread.run_sync(self._read_sync, path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            _refuse(path, "not a UTF-8 text file")
        return ReadTextFileResponse(content=_lines(text, params.line, params.limit, path))

    async def write_text_file(self, params: WriteTextFileRequest) -> WriteTextFileResponse:
        """``fs/write_text_file``: replace (or create) the file atomically.

        Raises :class:`RequestError`: ``-32602`` for a path outside the roots,
        not absolute or not a regular file, ``-32002`` for a missing directory.
        A write that is cancelled (between chunks) or fails leaves the old file
        as it was and no temporary file behind.
        """
        path = params.path
        try:
            data = params.content.encode("utf-8")
        except UnicodeEncodeError:
            _refuse(path, "content is not valid Unicode (lone surrogate)")
        pending = await trio.to_thread.run_sync(self._begin_write, path)
        done = False
        try:
            view = memoryview(data)
            for offset in range(0, len(view), _CHUNK):
                await trio.to_thread.run_sync(
                    _write_all, pending.fd, view[offset : offset + _CHUNK]
                )
            await trio.to_thread.run_sync(self._finish_write, pending)
            done = True
        except OSError as exc:
            _os_error(path, exc)
        finally:
            if not done:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(pending.abort)
        return WriteTextFileResponse()

    # ------------------------------------------------------------------
    # Blocking parts (worker threads)

    def _locate(self, path: str) -> tuple[str, list[str]]:
        """Check ``path`` and resolve it: ``(real root, components below)``."""
        roots = list(self._roots)
        if not isinstance(path, str) or not path:
            _refuse(str(path), "path must be a non-empty string", roots=roots)
        if "\0" in path:
            _refuse(path, "path contains a NUL character", roots=roots)
        if not os.path.isabs(path):
            _refuse(path, "path is not absolute", roots=roots)
        real = os.path.realpath(path)
        for root in self._roots:
            real_root = os.path.realpath(root)
            if real == real_root:
                return real_root, []
            prefix = real_root if real_root.endswith(os.sep) else real_root + os.sep
            if real.startswith(prefix):
                return real_root, real[len(prefix) :].split(os.sep)
        _refuse(path, "path is outside the workspace roots", roots=roots)

    def _open_parent(self, path: str, root: str, parts: list[str], create: bool) -> int:
        """Open the directory holding the last component, walking down from
        ``root`` without following symlinks."""
        fd = os.open(root, _DIR_FLAGS)
        try:
            for part in parts[:-1]:
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        _missing(path, "directory not found")
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ENOTDIR, errno.ELOOP) and stat.S_ISLNK(
                        os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
                    ):
                        # Resolved components hold no symlinks: this one
                        # was swapped in after the check.
                        _refuse(path, "a path component is a symbolic link")
                    raise
                os.close(fd)
                fd = child
        except BaseException:
            _close_quietly(fd)
            raise
        return fd

    def _read_sync(self, path: str) -> bytes:
        root, parts = self._locate(path)
        if not parts:
            _refuse(path, "is a directory")
        try:
            dir_fd = self._open_parent(path, root, parts, create=False)
            try:
                name = parts[-1]
                # Refuse what is not a regular file before opening it
                # (opening a device or FIFO can block or have effects).
                before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if not stat.S_ISREG(before.st_mode):
                    _refuse(path, f"not a regular file ({_kind(before.st_mode)})")
                fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
            finally:
                os.close(dir_fd)
            with open(fd, "rb", closefd=True) as file:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    _refuse(path, f"not a regular file ({_kind(info.st_mode)})")
                limit = self.max_read_bytes
                if info.st_size > limit:
                    _refuse(path, "file too large", size=info.st_size, max_bytes=limit)
                data = file.read(limit + 1)
                if len(data) > limit:
                    _refuse(path, "file too large", max_bytes=limit)
                return data
        except OSError as exc:
            _os_error(path, exc)

    def _begin_write(self, path: str) -> _PendingWrite:
        """Check the target; create the temporary file next to it."""
        root, parts = self._locate(path)
        if not parts:
            _refuse(path, "is a directory")
        try:
            pending = _PendingWrite(
                self._open_parent(path, root, parts, create=self.create_dirs), parts[-1]
            )
        except OSError as exc:
            _os_error(path, exc)
        try:
            self._create_temp(path, pending)
        except BaseException as exc:
            pending.abort()
            if isinstance(exc, OSError):
                _os_error(path, exc)
            raise
        return pending

    def _create_temp(self, path: str, pending: _PendingWrite) -> None:
        name, dir_fd = pending.name, pending.dir_fd
        try:
            before: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            before = None
        if before is not None:
            if not stat.S_ISREG(before.st_mode):
                _refuse(path, f"not a regular file ({_kind(before.st_mode)})")
            if not os.access(name, os.W_OK, dir_fd=dir_fd, follow_symlinks=False):
                _refuse(path, "permission denied (the file is read-only)")
        temp = f".{name[:64]}.{secrets.token_hex(6)}.acp-tmp"
        # New files get the usual 0o666 & ~umask; a replaced file's
        # permission bits are kept.
        pending.fd = os.open(temp, _TEMP_FLAGS, 0o600 if before else 0o666, dir_fd=dir_fd)
        pending.temp = temp
        if before is not None:
            os.fchmod(pending.fd, stat.S_IMODE(before.st_mode))

    def _finish_write(self, pending: _PendingWrite) -> None:
        if self.fsync:
            os.fsync(pending.fd)
        pending.close_file()
        os.replace(pending.temp, pending.name, src_dir_fd=pending.dir_fd, dst_dir_fd=pending.dir_fd)
        pending.temp = ""  # it is the file now: nothing to remove
        if self.fsync:
            os.fsync(pending.dir_fd)
        pending.close_dir()


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        written = os.write(fd, data)
        data = data[written:]


class WorkspaceFilesMixin:
    """Mixin for a :class:`~acp_trio.Client` subclass: serves
    ``fs/read_text_file`` and ``fs/write_text_file`` through
    :attr:`files`, which the subclass sets::

        class MyClient(acp_trio.contrib.WorkspaceFilesMixin, acp_trio.Client):
            def __init__(self, root: str) -> None:
                super().__init__()
                self.files = acp_trio.contrib.WorkspaceFiles([root])

    Put it before :class:`~acp_trio.Client` in the bases.
    """

    files: WorkspaceFiles

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        """Serve ``fs/read_text_file`` with :attr:`files`: see
        :meth:`WorkspaceFiles.read_text_file` for what it raises and what a cancellation does.
        """
        return await self.files.read_text_file(params)

    async def write_text_file(self, params: WriteTextFileRequest) -> WriteTextFileResponse:
        """Serve ``fs/write_text_file`` with :attr:`files`: see
        :meth:`WorkspaceFiles.write_text_file` for what it raises and what a cancellation does.
        """
        return await self.files.write_text_file(params)
