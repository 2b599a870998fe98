"""A client terminal as a Trio block, released on every exit path.

``async with client.terminal(session_id, "pytest", ["-q"], cwd=...) as
term:`` asks the client to run the command (``terminal/create``); inside,
:meth:`TerminalHandle.output`, :meth:`TerminalHandle.wait_for_exit` and
:meth:`TerminalHandle.kill`; on leaving the block, however it is left
(normally, by an exception, by cancellation: ``session/cancel``, a
deadline), ``terminal/release`` is sent and awaited in a shielded scope
bounded by ``release_timeout``, so no terminal is left running and a
cancellation is delayed at most that long. A release that fails (the
client's error, the connection closing) is logged, never raised over what
ended the block.

Cancelled while the client is still creating the terminal, the block sends
``$/cancel_request`` for ``terminal/create`` and goes on at once; should the
client answer with a terminal anyway (it created one before it read the
cancel), that terminal is released in the background as soon as the answer
arrives.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from acp_trio._exceptions import ConnectionClosed, RequestError
from acp_trio._public import NoPublicConstructor
from acp_trio._typed._handle_client import HandleClient
from acp_trio.schema import (
    CreateTerminalRequest,
    CreateTerminalResponse,
    EnvVariable,
    KillTerminalRequest,
    ReleaseTerminalRequest,
    TerminalOutputRequest,
    TerminalOutputResponse,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
)

if TYPE_CHECKING:
    from acp_trio._core._requests import PendingRequest

__all__ = ["TerminalHandle", "open_terminal"]

_log = logging.getLogger("acp_trio")


class TerminalHandle(metaclass=NoPublicConstructor):
    """A terminal the client runs for a session, made by
    :meth:`ClientProxy.terminal`."""

    def __init__(self, client: HandleClient, session_id: str, terminal_id: str) -> None:
        self._client = client
        #: The session it belongs to.
        self.session_id = session_id
        #: The client's ``terminalId`` (embed it with ``build.terminal(id)``).
        self.id = terminal_id
        self._released = False

    @property
    def released(self) -> bool:
        """Whether ``terminal/release`` was sent (the block has ended)."""
        return self._released

    def _check(self) -> None:
        if self._released:
            raise RuntimeError(f"terminal {self.id!r} was released")

    async def output(self) -> TerminalOutputResponse:
        """The output so far (``truncated`` past the byte limit), and the
        exit status once the command has exited.

        Raises ``RuntimeError`` once the block has ended (the terminal is
        released), :class:`~acp_trio.RequestError` for the client's refusal and
        :class:`~acp_trio.ConnectionClosed` if the connection ends first.
        Cancelling the call sends ``$/cancel_request``; the terminal is left
        as it is.
        """
        self._check()
        return await self._client.terminal_output(
            TerminalOutputRequest(session_id=self.session_id, terminal_id=self.id)
        )

    async def wait_for_exit(self) -> WaitForTerminalExitResponse:
        """Wait until the command exits; its exit code or signal.

        Raises ``RuntimeError`` once the block has ended (the terminal is
        released), :class:`~acp_trio.RequestError` for the client's refusal and
        :class:`~acp_trio.ConnectionClosed` if the connection ends first.
        Cancelling the wait (``session/cancel``, a deadline) sends
        ``$/cancel_request`` and leaves the command running; leaving the
        block then kills and releases it.
        """
        self._check()
        return await self._client.wait_for_terminal_exit(
            WaitForTerminalExitRequest(session_id=self.session_id, terminal_id=self.id)
        )

    async def kill(self) -> None:
        """Kill the command; the terminal stays (its output can still be
        read) until the block ends.

        Raises ``RuntimeError`` once the block has ended (the terminal is
        released), :class:`~acp_trio.RequestError` for the client's refusal and
        :class:`~acp_trio.ConnectionClosed` if the connection ends first.
        Cancelling the call sends ``$/cancel_request``; leaving the block
        still releases (and so kills) the terminal.
        """
        self._check()
        await self._client.kill_terminal(
            KillTerminalRequest(session_id=self.session_id, terminal_id=self.id)
        )


async def _release(client: HandleClient, session_id: str, terminal_id: str, bound: float) -> None:
    with trio.CancelScope(shield=True), trio.move_on_after(bound) as scope:
        try:
            await client.release_terminal(
                ReleaseTerminalRequest(session_id=session_id, terminal_id=terminal_id)
            )
        except (RequestError, ConnectionClosed) as exc:
            _log.warning("terminal/release of %r failed: %s", terminal_id, exc)
        except Exception:
            # Never raised over what ended the block (a malformed answer).
            _log.exception("terminal/release of %r failed", terminal_id)
    if scope.cancelled_caught:
        _log.warning("terminal/release of %r: no answer within %s s", terminal_id, bound)


def _release_when_answered(
    client: HandleClient, pending: PendingRequest, session_id: str, timeout: float
) -> None:
    """After a cancelled ``terminal/create``: release the terminal its late
    answer may still bring."""

    def answered() -> None:
        try:
            raw = pending.result_nowait()
        except BaseException:
            return  # -32800, an error, the connection closing: no terminal
        terminal_id = raw.get("terminalId") if isinstance(raw, dict) else None
        if isinstance(terminal_id, str) and not client.connection.closed:
            _log.debug(
                "releasing terminal %r, created after its request was cancelled", terminal_id
            )
            # Open, and running: an answer was read.
            client.connection.start_soon(_release, client, session_id, terminal_id, timeout)

    pending.add_done_callback(answered)


@asynccontextmanager
async def open_terminal(
    client: HandleClient,
    session_id: str,
    command: str,
    args: Sequence[str] = (),
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    output_byte_limit: int | None = None,
    release_timeout: float = 5.0,
) -> AsyncIterator[TerminalHandle]:
    """The implementation of :meth:`ClientProxy.terminal`."""
    if not release_timeout >= 0:
        raise ValueError(f"release_timeout must be >= 0 seconds, not {release_timeout!r}")
    client._require(client._caps().terminal, "terminal", "terminal/create")
    params = CreateTerminalRequest(
        session_id=session_id,
        command=command,
        args=list(args) or None,
        cwd=cwd,
        env=None if env is None else [EnvVariable(name=k, value=v) for k, v in env.items()],
        output_byte_limit=output_byte_limit,
    )
    connection = client.connection
    pending = await connection.send_request("terminal/create", client.converter.unstructure(params))
    try:
        raw = await pending.result()
    except BaseException:
        # Cancelled (or failed) while the answer was awaited, or after it
        # was read but before it was handed over: a terminal it brings, now
        # or later, is released.
        if not pending.done:
            pending.cancel()
        _release_when_answered(client, pending, session_id, release_timeout)
        raise
    try:
        created: CreateTerminalResponse = client._structure_result(
            "terminal/create", raw, CreateTerminalResponse
        )
    except BaseException:
        # A malformed answer: release the terminal it names, if it names one.
        terminal_id = raw.get("terminalId") if isinstance(raw, dict) else None
        if isinstance(terminal_id, str):
            await _release(client, session_id, terminal_id, release_timeout)
        raise
    handle = TerminalHandle._create(client, session_id, created.terminal_id)
    try:
        yield handle
    finally:
        handle._released = True
        await _release(client, session_id, created.terminal_id, release_timeout)
