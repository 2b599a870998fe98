"""A terminal's output and exit status as ACP reports them: the last bytes
of the output, cut on a UTF-8 character boundary (an incomplete last
character held back until the output is complete), and a return code as
``exitCode`` or ``signal``. Pure functions, no I/O."""

from __future__ import annotations

import signal

__all__ = ["exit_status", "render_output"]


def exit_status(returncode: int | None) -> tuple[int | None, str | None]:
    if returncode is None:
        return None, None
    if returncode >= 0:
        return returncode, None
    try:
        return None, signal.Signals(-returncode).name
    except ValueError:
        return None, str(-returncode)


def _incomplete_tail(data: bytes | bytearray) -> int:
    """How many bytes at the end of ``data`` start a UTF-8 character that is
    not complete yet (0 to 3)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: look further back
            continue
        if byte & 0xE0 == 0xC0:
            need = 2
        elif byte & 0xF0 == 0xE0:
            need = 3
        elif byte & 0xF8 == 0xF0:
            need = 4
        else:
            return 0
        return back if back < need else 0
    return 0


def _skip_continuations(data: bytes | bytearray, start: int) -> int:
    """The first index at or after ``start`` that does not continue a
    character (at most 3 bytes further)."""
    stop = min(len(data), start + 3)
    while start < stop and data[start] & 0xC0 == 0x80:
        start += 1
    return start


def render_output(
    data: bytes | bytearray, limit: int, truncated: bool, complete: bool
) -> tuple[str, bool]:
    """The text of the last ``limit`` bytes of ``data``, cut on a character
    boundary; ``(text, truncated)``. An incomplete last character is held
    back unless the output is ``complete``."""
    start = 0
    if len(data) > limit:
        start = len(data) - limit
        truncated = True
    if truncated:
        start = _skip_continuations(data, start)
    end = len(data) if complete else len(data) - _incomplete_tail(data)
    text = bytes(data[start : max(start, end)]).decode("utf-8", errors="replace")
    encoded = text.encode("utf-8")
    if len(encoded) > limit:  # replacement characters made it longer
        cut = _skip_continuations(encoded, len(encoded) - limit)
        text = encoded[cut:].decode("utf-8")
        truncated = True
    return text, truncated
