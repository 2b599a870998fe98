"""WorkspaceFiles on real files: every refusal, line/limit, atomic writes.

Real files in ``tmp_path``, real clock; every test runs under
``trio.fail_after`` (``@limited``).
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_trio import RequestError
from acp_trio.contrib import _workspace
from acp_trio.contrib._workspace import WorkspaceFiles
from acp_trio.schema import ReadTextFileRequest, WriteTextFileRequest

from .conftest import limited

INVALID = -32602
NOT_FOUND = -32002


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    (path / "sub").mkdir(parents=True)
    (path / "a.txt").write_text("alpha\n")
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("secret\n")
    return path


@pytest.fixture
def files(root: Path) -> WorkspaceFiles:
    return WorkspaceFiles([root])


def read_req(path: str | Path, line: int | None = None, limit: int | None = None) -> Any:
    return ReadTextFileRequest(session_id="s", path=str(path), line=line, limit=limit)


def write_req(path: str | Path, content: str) -> Any:
    return WriteTextFileRequest(session_id="s", path=str(path), content=content)


async def refused(call: Awaitable[Any], code: int, reason: str | None = None) -> RequestError:
    with pytest.raises(RequestError) as info:
        await call
    error = info.value
    assert error.code == code, error
    assert isinstance(error.data, dict)
    assert "path" in error.data
    if reason is not None:
        assert reason in error.data["reason"], error.data
        assert reason in error.message
    return error


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def leftovers(directory: Path) -> list[str]:
    """Temporary files of a write, left in ``directory``."""
    return [name for name in names(directory) if name.endswith(".acp-tmp")]


async def read(files: WorkspaceFiles, path: str | Path, **kw: Any) -> str:
    result = await files.read_text_file(read_req(path, **kw))
    content: str = result.content
    return content


# ----------------------------------------------------------------------
# What is allowed


@limited
async def test_read_and_write_inside_the_root(files: WorkspaceFiles, root: Path) -> None:
    assert await read(files, root / "a.txt") == "alpha\n"
    await files.write_text_file(write_req(root / "a.txt", "beta\n"))
    assert (root / "a.txt").read_text() == "beta\n"
    assert await read(files, root / "a.txt") == "beta\n"
    assert leftovers(root) == []


@limited
async def test_write_creates_a_missing_file(files: WorkspaceFiles, root: Path) -> None:
    await files.write_text_file(write_req(root / "sub" / "new.txt", "héllo €\n"))
    assert (root / "sub" / "new.txt").read_text(encoding="utf-8") == "héllo €\n"
    mode = stat.S_IMODE((root / "sub" / "new.txt").stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


@limited
async def test_dotdot_that_stays_inside_is_fine(files: WorkspaceFiles, root: Path) -> None:
    assert await read(files, f"{root}/sub/../a.txt") == "alpha\n"


@limited
async def test_symlink_inside_the_root_is_followed(files: WorkspaceFiles, root: Path) -> None:
    (root / "link.txt").symlink_to(root / "a.txt")
    assert await read(files, root / "link.txt") == "alpha\n"
    await files.write_text_file(write_req(root / "link.txt", "through\n"))
    # The target was replaced; the link is still a link.
    assert (root / "link.txt").is_symlink()
    assert (root / "a.txt").read_text() == "through\n"


@limited
async def test_a_symlinked_root_works(tmp_path: Path, root: Path) -> None:
    (tmp_path / "alias").symlink_to(root)
    files = WorkspaceFiles([tmp_path / "alias"])
    assert await read(files, tmp_path / "alias" / "a.txt") == "alpha\n"
    assert await read(files, root / "a.txt") == "alpha\n"  # the same directory
    assert await files.resolve(str(tmp_path / "alias" / "a.txt")) == str(root / "a.txt")


@limited
async def test_replacing_keeps_the_permission_bits(files: WorkspaceFiles, root: Path) -> None:
    os.chmod(root / "a.txt", 0o640)
    await files.write_text_file(write_req(root / "a.txt", "x"))
    assert stat.S_IMODE((root / "a.txt").stat().st_mode) == 0o640


@limited
async def test_several_roots(root: Path, outside: Path) -> None:
    files = WorkspaceFiles([root, outside])
    assert await read(files, outside / "secret.txt") == "secret\n"


# ----------------------------------------------------------------------
# Refusals


@limited
async def test_relative_path_is_refused(files: WorkspaceFiles, root: Path) -> None:
    error = await refused(files.read_text_file(read_req("a.txt")), INVALID, "not absolute")
    # The data names the path and the roots it must lie in.
    assert error.data == {"path": "a.txt", "reason": "path is not absolute", "roots": [str(root)]}
    assert "a.txt" in str(error)
    assert str(root) in str(error)
    await refused(files.write_text_file(write_req("sub/x.txt", "x")), INVALID, "not absolute")
    assert not (root / "sub" / "x.txt").exists()


@limited
async def test_dotdot_escape_is_refused(files: WorkspaceFiles, root: Path, outside: Path) -> None:
    escape = f"{root}/../outside/secret.txt"
    error = await refused(files.read_text_file(read_req(escape)), INVALID, "outside")
    assert error.data["roots"] == [str(root)]
    await refused(files.write_text_file(write_req(escape, "pwned")), INVALID, "outside")
    assert (outside / "secret.txt").read_text() == "secret\n"


@limited
async def test_path_outside_the_roots_is_refused(files: WorkspaceFiles) -> None:
    await refused(files.read_text_file(read_req("/etc/passwd")), INVALID, "outside")
    await refused(files.write_text_file(write_req("/etc/acp-test", "x")), INVALID, "outside")
    assert "acp-test" not in names(Path("/etc"))


@limited
async def test_sibling_with_the_root_as_prefix_is_outside(tmp_path: Path, root: Path) -> None:
    (tmp_path / "root-evil").mkdir()
    (tmp_path / "root-evil" / "x.txt").write_text("x")
    files = WorkspaceFiles([root])
    await refused(files.read_text_file(read_req(tmp_path / "root-evil" / "x.txt")), INVALID)


@limited
async def test_symlink_escaping_the_root_is_refused(
    files: WorkspaceFiles, root: Path, outside: Path
) -> None:
    (root / "evil.txt").symlink_to(outside / "secret.txt")
    await refused(files.read_text_file(read_req(root / "evil.txt")), INVALID, "outside")
    await refused(files.write_text_file(write_req(root / "evil.txt", "pwned")), INVALID)
    assert (outside / "secret.txt").read_text() == "secret\n"
    # A dangling link pointing out: no file is created outside either.
    (root / "dangling.txt").symlink_to(outside / "created.txt")
    await refused(files.write_text_file(write_req(root / "dangling.txt", "x")), INVALID)
    assert not (outside / "created.txt").exists()


@limited
async def test_symlinked_parent_directory_escaping_is_refused(
    files: WorkspaceFiles, root: Path, outside: Path
) -> None:
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    await refused(
        files.read_text_file(read_req(root / "linkdir" / "secret.txt")), INVALID, "outside"
    )
    await refused(
        files.write_text_file(write_req(root / "linkdir" / "new.txt", "x")), INVALID, "outside"
    )
    await refused(files.write_text_file(write_req(root / "linkdir" / "secret.txt", "x")), INVALID)
    assert names(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret\n"


@limited
async def test_dev_null_is_refused() -> None:
    # Outside the roots, and not a regular file even when inside one.
    files = WorkspaceFiles(["/dev"])
    await refused(files.read_text_file(read_req("/dev/null")), INVALID, "character device")
    await refused(files.write_text_file(write_req("/dev/null", "x")), INVALID, "character device")


@limited
async def test_fifo_is_refused_without_blocking(files: WorkspaceFiles, root: Path) -> None:
    os.mkfifo(root / "fifo")
    # Opening a FIFO would block until the other end comes, which never
    # happens here: a refusal at all (under the test's watchdog) did not open it.
    await refused(files.read_text_file(read_req(root / "fifo")), INVALID, "FIFO")
    await refused(files.write_text_file(write_req(root / "fifo", "x")), INVALID, "FIFO")
    assert stat.S_ISFIFO(os.lstat(root / "fifo").st_mode)
    assert leftovers(root) == []


@limited
async def test_socket_is_refused(real_tmp: Path) -> None:
    short = real_tmp / "s"  # AF_UNIX paths are short
    short.mkdir()
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(short / "sock"))
        files = WorkspaceFiles([short])
        await refused(files.read_text_file(read_req(short / "sock")), INVALID, "socket")
    finally:
        sock.close()


@limited
async def test_directory_is_refused(files: WorkspaceFiles, root: Path) -> None:
    await refused(files.read_text_file(read_req(root / "sub")), INVALID, "directory")
    await refused(files.read_text_file(read_req(root)), INVALID, "directory")
    await refused(files.write_text_file(write_req(root / "sub", "x")), INVALID, "directory")
    await refused(files.write_text_file(write_req(root, "x")), INVALID, "directory")
    assert (root / "sub").is_dir()


@limited
async def test_missing_file_is_not_found(files: WorkspaceFiles, root: Path) -> None:
    error = await refused(files.read_text_file(read_req(root / "nope.txt")), NOT_FOUND)
    assert error.data == {"path": str(root / "nope.txt"), "reason": "file not found"}
    await refused(files.read_text_file(read_req(root / "no" / "such.txt")), NOT_FOUND)


@limited
async def test_missing_directory_is_not_created_by_default(
    files: WorkspaceFiles, root: Path
) -> None:
    await refused(
        files.write_text_file(write_req(root / "new" / "dir" / "f.txt", "x")),
        NOT_FOUND,
        "directory not found",
    )
    assert not (root / "new").exists()


@limited
async def test_missing_directories_are_created_when_configured(root: Path) -> None:
    files = WorkspaceFiles([root], create_dirs=True)
    await files.write_text_file(write_req(root / "new" / "dir" / "f.txt", "x"))
    assert (root / "new" / "dir" / "f.txt").read_text() == "x"


@limited
async def test_file_used_as_a_directory_is_refused(files: WorkspaceFiles, root: Path) -> None:
    await refused(files.read_text_file(read_req(root / "a.txt" / "x")), INVALID)
    await refused(files.write_text_file(write_req(root / "a.txt" / "x", "x")), INVALID)


@limited
async def test_odd_paths_are_refused(files: WorkspaceFiles, root: Path) -> None:
    await refused(files.read_text_file(read_req(f"{root}/a\0.txt")), INVALID, "NUL")
    await refused(files.read_text_file(read_req("")), INVALID)


@limited
async def test_size_cap(root: Path) -> None:
    (root / "big.txt").write_text("x" * 1000)
    files = WorkspaceFiles([root], max_read_bytes=999)
    error = await refused(files.read_text_file(read_req(root / "big.txt")), INVALID, "too large")
    assert error.data["size"] == 1000
    assert error.data["max_bytes"] == 999
    # line/limit do not lift it.
    await refused(files.read_text_file(read_req(root / "big.txt", line=1, limit=1)), INVALID)
    assert len(await read(WorkspaceFiles([root], max_read_bytes=1000), root / "big.txt")) == 1000


@limited
async def test_invalid_utf8_is_refused(files: WorkspaceFiles, root: Path) -> None:
    (root / "bin").write_bytes(b"\xff\xfe\x00binary")
    await refused(files.read_text_file(read_req(root / "bin")), INVALID, "UTF-8")


@limited
async def test_lone_surrogate_content_is_refused(files: WorkspaceFiles, root: Path) -> None:
    await refused(files.write_text_file(write_req(root / "a.txt", "bad \ud800")), INVALID)
    assert (root / "a.txt").read_text() == "alpha\n"
    assert leftovers(root) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write read-only files")
@limited
async def test_read_only_file_is_refused(files: WorkspaceFiles, root: Path) -> None:
    os.chmod(root / "a.txt", 0o444)
    await refused(files.write_text_file(write_req(root / "a.txt", "x")), INVALID, "permission")
    assert (root / "a.txt").read_text() == "alpha\n"


def test_roots_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="absolute"):
        WorkspaceFiles(["relative/dir"])
    with pytest.raises(ValueError, match="root"):
        WorkspaceFiles([])


# ----------------------------------------------------------------------
# Races: the path is checked, then swapped for a symlink before the open


@limited
async def test_directory_swapped_for_a_symlink_after_the_check(
    files: WorkspaceFiles, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "sub" / "secret.txt").write_text("inside\n")
    locate = WorkspaceFiles._locate

    def racing_locate(self: WorkspaceFiles, path: str) -> tuple[str, list[str]]:
        result = locate(self, path)
        if not (root / "sub").is_symlink():
            (root / "sub").rename(root / "sub-moved")
            (root / "sub").symlink_to(outside, target_is_directory=True)
        return result

    monkeypatch.setattr(WorkspaceFiles, "_locate", racing_locate)
    await refused(
        files.read_text_file(read_req(root / "sub" / "secret.txt")), INVALID, "symbolic link"
    )
    (root / "sub").unlink()
    (root / "sub-moved").rename(root / "sub")
    await refused(
        files.write_text_file(write_req(root / "sub" / "secret.txt", "pwned")),
        INVALID,
        "symbolic link",
    )
    assert (outside / "secret.txt").read_text() == "secret\n"


@limited
async def test_file_swapped_for_a_symlink_after_the_check(
    files: WorkspaceFiles, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locate = WorkspaceFiles._locate

    def racing_locate(self: WorkspaceFiles, path: str) -> tuple[str, list[str]]:
        result = locate(self, path)
        if not (root / "a.txt").is_symlink():
            (root / "a.txt").unlink()
            (root / "a.txt").symlink_to(outside / "secret.txt")
        return result

    monkeypatch.setattr(WorkspaceFiles, "_locate", racing_locate)
    await refused(files.read_text_file(read_req(root / "a.txt")), INVALID, "symbolic link")
    (root / "a.txt").unlink()
    (root / "a.txt").write_text("alpha\n")
    await refused(files.write_text_file(write_req(root / "a.txt", "x")), INVALID, "symbolic link")
    assert (outside / "secret.txt").read_text() == "secret\n"


# ----------------------------------------------------------------------
# line / limit

TEXT = "one\ntwo\nthree\nfour"


@pytest.mark.parametrize(
    ("line", "limit", "expected"),
    [
        (None, None, TEXT),
        (1, None, TEXT),
        (2, None, "two\nthree\nfour"),
        (2, 2, "two\nthree\n"),
        (None, 1, "one\n"),
        (4, 10, "four"),
        (5, None, ""),
        (100, 5, ""),
        (1, 0, ""),
        (0, 1, "one\n"),  # line 0 reads as line 1
    ],
)
@limited
async def test_line_and_limit(
    files: WorkspaceFiles, root: Path, line: int | None, limit: int | None, expected: str
) -> None:
    (root / "lines.txt").write_text(TEXT)
    assert await read(files, root / "lines.txt", line=line, limit=limit) == expected


@limited
async def test_line_ends_are_kept_and_only_newline_splits(
    files: WorkspaceFiles, root: Path
) -> None:
    (root / "crlf.txt").write_bytes(b"a\r\nb\x0cc\r\nd\n")
    assert await read(files, root / "crlf.txt", line=2, limit=1) == "b\x0cc\r\n"


@limited
async def test_negative_line_is_refused(files: WorkspaceFiles, root: Path) -> None:
    await refused(files.read_text_file(read_req(root / "a.txt", line=-1)), INVALID)


# ----------------------------------------------------------------------
# Atomic writes


@limited
async def test_failed_write_leaves_the_old_file_and_no_temp(
    files: WorkspaceFiles, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def write_half_then_fail(fd: int, data: memoryview) -> None:
        os.write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_workspace, "_write_all", write_half_then_fail)
    error = await refused(
        files.write_text_file(write_req(root / "a.txt", "new content " * 100)), -32603
    )
    assert error.data["reason"] == "No space left on device"
    assert (root / "a.txt").read_text() == "alpha\n"
    assert leftovers(root) == []
    # Same for a new file: it is not created at all.
    await refused(files.write_text_file(write_req(root / "b.txt", "x" * 10)), -32603)
    assert not (root / "b.txt").exists()
    assert leftovers(root) == []


@limited
async def test_cancelled_write_leaves_the_old_file_and_no_temp(
    files: WorkspaceFiles, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_workspace, "_CHUNK", 8)
    written: list[int] = []
    scope = trio.CancelScope()

    def write_and_cancel(fd: int, data: memoryview) -> None:
        os.write(fd, data)
        written.append(len(data))
        if len(written) == 3:
            # Part of the content is in the temporary file now.
            assert leftovers(root) != []
            trio.from_thread.run_sync(scope.cancel)

    monkeypatch.setattr(_workspace, "_write_all", write_and_cancel)
    with scope:
        await files.write_text_file(write_req(root / "a.txt", "0123456789" * 10))
    assert scope.cancelled_caught
    assert written == [8, 8, 8]
    assert (root / "a.txt").read_text() == "alpha\n"
    assert leftovers(root) == []


@limited
async def test_large_write_in_chunks(
    files: WorkspaceFiles, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_workspace, "_CHUNK", 1000)
    content = "".join(f"line {i} é€😀\n" for i in range(2000))
    await files.write_text_file(write_req(root / "big.txt", content))
    assert (root / "big.txt").read_text(encoding="utf-8") == content
    await files.write_text_file(write_req(root / "empty.txt", ""))
    assert (root / "empty.txt").read_bytes() == b""


@limited
async def test_fsync_mode(root: Path) -> None:
    files = WorkspaceFiles([root], fsync=True)
    await files.write_text_file(write_req(root / "a.txt", "synced\n"))
    assert (root / "a.txt").read_text() == "synced\n"
    assert leftovers(root) == []
