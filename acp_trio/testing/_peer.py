"""A scripted raw peer: write exact bytes, read exact replies.

The typed APIs cannot produce malformed traffic, two messages in one write,
or a cancel racing a request; a test of such cases needs to control the
bytes. :class:`ScriptedPeer` plays the other side of any byte stream: an
agent or client served in memory (:func:`open_scripted_client`,
:func:`open_scripted_agent`) or a spawned agent process
(:func:`open_scripted_process`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Literal

import attrs
import trio
import trio.testing

from acp_trio._core._connection import ConnectionConfig
from acp_trio._transports import AgentProcess, open_agent_process
from acp_trio._transports._process import StderrMode
from acp_trio._typed._agent import Agent, open_client
from acp_trio._typed._client import Client, open_agent

__all__ = [
    "ExpectationFailed",
    "PeerEvent",
    "ScriptedPeer",
    "open_scripted_agent",
    "open_scripted_client",
    "open_scripted_process",
]

#: The value of :attr:`PeerEvent.message` for a line that is not JSON.
NOT_JSON: Final = object()

Message = Any


class ExpectationFailed(AssertionError):
    """What a :class:`ScriptedPeer` expected did not happen: a timeout, an
    end of stream, a line that is not JSON, a message where silence was
    expected."""


@attrs.frozen
class PeerEvent:
    """One line on the wire, as the scripted peer saw it."""

    direction: Literal["sent", "received"]
    #: ``trio.current_time()`` when it was written or read.
    time: float
    #: The exact bytes, without the line end for received lines.
    data: bytes
    #: The decoded JSON value, or :data:`NOT_JSON`.
    message: Any


def encode_line(message: Any) -> bytes:
    """One compact JSON line (what a conforming peer writes)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _decode(line: bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        return NOT_JSON


def _brief(value: Any, limit: int = 300) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ScriptedPeer:
    """One end of a byte stream, written and read by a test, line by line.

    Every read takes a ``within`` timeout (default: ``timeout`` given here) and raises
    :class:`ExpectationFailed` when it expires, so a test never hangs.
    :attr:`transcript` keeps every line both ways. ``process`` is set for a
    peer of :func:`open_scripted_process`.
    """

    def __init__(self, stream: trio.abc.Stream, *, timeout: float = 5.0) -> None:
        self.stream = stream
        self.timeout = timeout
        self.transcript: list[PeerEvent] = []
        self.process: AgentProcess | None = None
        self._buffer = bytearray()
        self._eof = False
        self._backlog: list[Message] = []
        self._ids = 0

    # -- writing

    async def send(self, *messages: Any) -> None:
        """Write the messages in one write: ``bytes`` go out verbatim (for
        malformed input: include the ``\\n`` yourself); anything else is
        encoded as one JSON line.

        Raises what the stream raises (``trio.BrokenResourceError`` once the
        other end is gone). A cancelled write may have sent part of the data
        (the transcript has it all).
        """
        chunks = [m if isinstance(m, bytes | bytearray) else encode_line(m) for m in messages]
        data = b"".join(bytes(c) for c in chunks)
        now = trio.current_time()
        for chunk in chunks:
            self.transcript.append(PeerEvent("sent", now, bytes(chunk), _decode(bytes(chunk))))
        await self.stream.send_all(data)

    async def send_bytes(self, data: bytes) -> None:
        """Write ``data`` exactly as given.

        Raises what the stream raises (``trio.BrokenResourceError`` once the
        other end is gone). A cancelled write may have sent part of the data
        (the transcript has it all).
        """
        await self.send(data)

    def next_id(self) -> int:
        """The next integer request id (1, 2, ...), as :meth:`request` uses it."""
        self._ids += 1
        return self._ids

    async def request(
        self, method: str, params: Any = None, *, id: int | str | None = None
    ) -> int | str | None:
        """Send a request (the next integer id unless ``id`` is given);
        return its id. Does not wait for the response (see
        :meth:`receive_response`).

        Raises what the stream raises (``trio.BrokenResourceError`` once the
        other end is gone). A cancelled write may have sent part of the data
        (the transcript has it all).
        """
        request_id = self.next_id() if id is None else id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return request_id

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification of ``method`` (``params`` left out when ``None``).

        Raises what the stream raises (``trio.BrokenResourceError`` once the
        other end is gone). A cancelled write may have sent part of the data
        (the transcript has it all).
        """
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def respond(self, request_id: Any, result: Any) -> None:
        """Send the result of the peer's request ``request_id``.

        Raises what the stream raises (``trio.BrokenResourceError`` once the
        other end is gone). A cancelled write may have sent part of the data
        (the transcript has it all).
        """
        await self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def respond_error(
        self, request_id: Any, code: int, message: str = "error", data: Any = None
    ) -> None:
        """Send an error reply (``code``, ``message``, ``data`` if given) to
        the peer's request ``request_id``.

        Raises what the stream raises (``trio.BrokenResourceError`` once the
        other end is gone). A cancelled write may have sent part of the data
        (the transcript has it all).
        """
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        await self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    async def cancel_request(self, request_id: Any) -> None:
        """Send ``$/cancel_request`` for ``request_id``.

        Raises what the stream raises (``trio.BrokenResourceError`` once the
        other end is gone). A cancelled write may have sent part of the data
        (the transcript has it all).
        """
        await self.notify("$/cancel_request", {"requestId": request_id})

    async def close_send(self) -> None:
        """Close our sending side: the peer reads end of stream (a stream that
        cannot half-close is closed whole). Cancelled, the side is still closed
        (as Trio's ``aclose`` does), then ``trio.Cancelled`` propagates.
        """
        send = self.stream.send_stream if isinstance(self.stream, trio.StapledStream) else None
        if send is not None:
            await send.aclose()
        else:
            await self.stream.aclose()

    async def aclose(self) -> None:
        """Close the stream both ways. Cancelled, it is still closed (as Trio's
        ``aclose`` does), then ``trio.Cancelled`` propagates.
        """
        await self.stream.aclose()

    # -- reading

    async def _fill(self) -> bool:
        if self._eof:
            return False
        data = await self.stream.receive_some(65536)
        if not data:
            self._eof = True
            return False
        self._buffer += data
        return True

    async def _next_line(self) -> bytes | None:
        while (end := self._buffer.find(b"\n")) < 0:
            if not await self._fill():
                if not self._buffer:
                    return None
                line = bytes(self._buffer)
                self._buffer.clear()
                break
        else:
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
        self.transcript.append(PeerEvent("received", trio.current_time(), line, _decode(line)))
        return line

    def _timeout(self, within: float | None) -> float:
        return self.timeout if within is None else within

    def _failure(self, what: str, timeout: float) -> ExpectationFailed:
        recent = [_brief(e.data, 200) for e in self.transcript[-3:] if e.direction == "received"]
        seen = f"; last received: {recent}" if recent else "; nothing received yet"
        return ExpectationFailed(f"no {what} within {timeout:g} s{seen}")

    async def receive_line(self, within: float | None = None) -> bytes:
        """The next line exactly as received (without ``\\n``), parsed or not.

        Raises :class:`ExpectationFailed` when ``within`` expires or the
        stream ends first. A cancellation loses nothing: bytes already read stay
        buffered for the next read.
        """
        limit = self._timeout(within)
        with trio.move_on_after(limit):
            line = await self._next_line()
            if line is None:
                raise ExpectationFailed("end of stream while waiting for a line")
            return line
        raise self._failure("line", limit)

    async def receive(self, within: float | None = None) -> Message:
        """The next JSON message (blank lines are skipped); a queued one first.
        Raises :class:`ExpectationFailed` for a line that is not JSON.

        Raises :class:`ExpectationFailed` when ``within`` expires or the
        stream ends first. A cancellation loses nothing: bytes already read stay
        buffered for the next read.
        """
        if self._backlog:
            await trio.lowlevel.checkpoint()
            return self._backlog.pop(0)
        limit = self._timeout(within)
        with trio.move_on_after(limit):
            while True:
                line = await self._next_line()
                if line is None:
                    raise ExpectationFailed("end of stream while waiting for a message")
                if not line.strip():
                    continue
                value = _decode(line)
                if value is NOT_JSON:
                    raise ExpectationFailed(f"received a line that is not JSON: {_brief(line)}")
                return value
        raise self._failure("message", limit)

    async def receive_until(
        self, match: Callable[[Message], bool], within: float | None = None, what: str = ""
    ) -> Message:
        """The first message that ``match``\\ es; the others read meanwhile
        stay queued, in order, for :meth:`receive`.

        Raises :class:`ExpectationFailed` when ``within`` expires or the
        stream ends first. A cancellation loses nothing: bytes already read stay
        buffered for the next read. The skipped messages are queued again on every exit, a
        cancellation included.
        """
        for index, message in enumerate(self._backlog):
            if match(message):
                await trio.lowlevel.checkpoint()
                return self._backlog.pop(index)
        limit = self._timeout(within)
        skipped: list[Message] = []
        try:
            with trio.fail_after(limit):
                while True:
                    message = await self.receive(limit)
                    if match(message):
                        return message
                    skipped.append(message)
        except trio.TooSlowError:
            raise self._failure(what or "matching message", limit) from None
        finally:
            self._backlog.extend(skipped)

    async def receive_response(self, request_id: Any, within: float | None = None) -> Message:
        """The response to ``request_id`` (exact id match: ``1`` is not
        ``"1"``); other messages read meanwhile stay queued.

        Raises :class:`ExpectationFailed` when ``within`` expires or the
        stream ends first. A cancellation loses nothing: bytes already read stay
        buffered for the next read.
        """

        def match(message: Message) -> bool:
            return (
                isinstance(message, dict)
                and "method" not in message
                and "id" in message
                and type(message["id"]) is type(request_id)
                and message["id"] == request_id
            )

        return await self.receive_until(match, within, f"response to id {request_id!r}")

    async def receive_request(self, method: str, within: float | None = None) -> Message:
        """The next request (or notification) of ``method``; others stay queued.

        Raises :class:`ExpectationFailed` when ``within`` expires or the
        stream ends first. A cancellation loses nothing: bytes already read stay
        buffered for the next read.
        """
        return await self.receive_until(
            lambda m: isinstance(m, dict) and m.get("method") == method, within, method
        )

    async def receive_all(self, within: float | None = None) -> list[Message]:
        """Every message until the end of the stream, in order: the queued
        ones first, then each line read (blank lines are skipped). Each line
        is in :attr:`transcript` as soon as it is read, so a task running
        this meanwhile leaves a live view there.

        Raises :class:`ExpectationFailed` for a line that is not JSON, or when
        ``within`` expires before the end (``math.inf``: no limit); the
        messages read until then are queued again for :meth:`receive`, as
        they are when the call is cancelled.
        """
        messages, self._backlog = self._backlog, []
        limit = self._timeout(within)
        ended = False
        try:
            with trio.move_on_after(limit):
                while (line := await self._next_line()) is not None:
                    if not line.strip():
                        continue
                    value = _decode(line)
                    if value is NOT_JSON:
                        raise ExpectationFailed(f"received a line that is not JSON: {_brief(line)}")
                    messages.append(value)
                ended = True
        finally:
            if not ended:
                self._backlog[:0] = messages
        if not ended:
            raise self._failure("end of stream", limit)
        return messages

    @property
    def queued(self) -> list[Message]:
        """Messages read but not handed out yet."""
        return list(self._backlog)

    async def expect_silence(self, seconds: float = 0.2) -> None:
        """Fail (:class:`ExpectationFailed`) if anything arrives within
        ``seconds`` (or is queued), or the stream ends. Use the autojump clock.
        A cancellation loses nothing: what was read stays buffered.
        """
        if self._backlog:
            raise ExpectationFailed(f"expected silence, but {_brief(self._backlog[0])} is queued")
        with trio.move_on_after(seconds):
            line = await self._next_line()
            if line is None:
                raise ExpectationFailed("expected silence, got end of stream")
            raise ExpectationFailed(f"expected silence, got {_brief(line)}")

    async def expect_eof(self, within: float | None = None) -> None:
        """Wait for the end of the stream; fail (:class:`ExpectationFailed`) on
        any other line or when ``within`` expires. A cancellation loses nothing:
        what was read stays buffered.
        """
        limit = self._timeout(within)
        with trio.move_on_after(limit):
            line = await self._next_line()
            if line is not None:
                raise ExpectationFailed(f"expected end of stream, got {_brief(line)}")
            return
        raise self._failure("end of stream", limit)


@asynccontextmanager
async def open_scripted_client(
    agent: Agent | Callable[[], Agent],
    *,
    config: ConnectionConfig | None = None,
    receive_timeout: float = 5.0,
) -> AsyncIterator[ScriptedPeer]:
    """Serve ``agent`` (or a new one from the factory ``agent``) in memory to
    a :class:`ScriptedPeer` playing the client.

    Leaving the block, also by an exception or a cancellation, closes the
    agent's connection (its running handlers are cancelled).
    """
    peer_end, agent_end = trio.testing.memory_stream_pair()
    peer = ScriptedPeer(peer_end, timeout=receive_timeout)
    async with open_client(agent, agent_end, config=config):
        yield peer


@asynccontextmanager
async def open_scripted_agent(
    client: Client, *, config: ConnectionConfig | None = None, receive_timeout: float = 5.0
) -> AsyncIterator[ScriptedPeer]:
    """Connect ``client`` in memory to a :class:`ScriptedPeer` playing the
    agent; ``client.agent`` is the client's proxy.

    Leaving the block, also by an exception or a cancellation, closes the
    client's connection (its running handlers are cancelled).
    """
    peer_end, client_end = trio.testing.memory_stream_pair()
    peer = ScriptedPeer(peer_end, timeout=receive_timeout)
    async with open_agent(client, client_end, config=config):
        yield peer


@asynccontextmanager
async def open_scripted_process(
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stderr: StderrMode | logging.Logger = "capture",
    receive_timeout: float = 5.0,
) -> AsyncIterator[ScriptedPeer]:
    """Spawn the agent ``command`` and play its client, byte by byte. The
    peer's :attr:`~ScriptedPeer.process` is the :class:`AgentProcess`
    (exit code, stderr tail). Leaving the block shuts the agent down, as
    :func:`~acp_trio.lowlevel.open_agent_process` does: shielded from cancellation
    and bounded in time. Raises ``OSError`` if it cannot be started.

    Unlike :func:`~acp_trio.open_spawned_agent`, the default is ``"capture"``:
    tests assert on the tail (``peer.process.stderr_tail()``) and agents
    under test are often made to crash or flood on purpose; pass
    ``"forward"`` to see the lines.
    """
    async with open_agent_process(command, cwd=cwd, env=env, stderr=stderr) as process:
        peer = ScriptedPeer(process.stream, timeout=receive_timeout)
        peer.process = process
        yield peer
