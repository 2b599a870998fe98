"""The Streamable HTTP profile, client side, on ``httpx2`` (httpcore2's
Trio backend, HTTP/1.1 or h2c): POST each message, read the replies and the
agent's messages from SSE streams, reconnecting a dropped stream with
backoff and jitter."""

from __future__ import annotations

import json
import logging
import random
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from typing import Any

import h2.errors
import h2.exceptions
import httpcore2
import httpx2
import trio

from acp_trio._core._groups import plain_exceptions
from acp_trio._core._message_stream import MessageStream, oversized
from acp_trio._jsonrpc import OversizedFrame
from acp_trio.remote._http_connection import id_key, session_of
from acp_trio.remote._limits import DEFAULT_MAX_MESSAGE_SIZE, library_limit
from acp_trio.remote._sse import SseDecoder, SseTooLarge

__all__ = ["HttpMessages", "HttpStatusError", "open_http_stream", "reset_when_left"]

_log = logging.getLogger("acp_trio.remote")

CONNECTION_ID = "Acp-Connection-Id"
SESSION_ID = "Acp-Session-Id"


_HTTPCORE_ERRORS = (
    httpcore2.NetworkError,
    httpcore2.ProtocolError,
    httpcore2.TimeoutException,
)

# Statuses that opening the stream again will not change.
# (409: the server no longer holds the cursor of a resumed stream.)
_FATAL = frozenset({400, 401, 403, 404, 405, 406, 409, 410})


# httpx2 and httpcore2 (2.16.2 to 2.17) internals reached into below, each
# checked by tests/remote/test_httpcore_contract.py, so that a release that
# moves one fails there first. At run time a missing one is logged once, as
# a warning naming what is lost, and the work it did is skipped.
_warned: set[str] = set()


def _internals_moved(what: str, lost: str) -> None:
    if what in _warned:
        return
    _warned.add(what)
    _log.warning(
        "httpx2 %s / httpcore2 %s no longer have %s (acp_trio reaches into it): %s. "
        "Please report it to acp_trio, with these versions.",
        httpx2.__version__,
        httpcore2.__version__,
        what,
        lost,
    )


def _httpcore_stream(response: httpx2.Response, lost: str) -> Any:
    """httpcore2's stream of the response's body (under httpx2's elapsed-time
    wrapper, ``BoundAsyncStream._stream``, and its transport's stream,
    ``AsyncResponseStream._httpcore_stream``); ``None`` if it is no longer
    there (logged: ``lost`` says what is lost then)."""
    wrapper: Any = response.stream
    inner = getattr(getattr(wrapper, "_stream", None), "_httpcore_stream", None)
    if inner is None:
        _internals_moved("the httpcore2 stream under a response's stream", lost)
    return inner


def raw_chunks(response: httpx2.Response) -> AsyncGenerator[bytes, None]:
    """The body's bytes, as an async generator to close with ``aclosing``.

    httpx2's own iterators leave the generator of the layer below unclosed
    when left early (a ResourceWarning under Trio); httpcore2's stream
    closes what it opened, so it is read directly.
    """
    lost = "a response left early may leave a generator unclosed (a ResourceWarning)"
    inner = _httpcore_stream(response, lost)
    if inner is not None:
        chunks = inner.__aiter__()
        if isinstance(chunks, AsyncGenerator):
            return chunks
        _internals_moved("httpcore2's response stream as an async generator", lost)
    return response.aiter_raw()


@asynccontextmanager
async def reset_when_left(response: httpx2.Response) -> AsyncIterator[httpx2.Response]:
    """Wrap the reading of a streamed HTTP/2 response: if the block is left
    before the body ended, the stream is reset (``RST_STREAM``, ``CANCEL``).

    Works around httpcore2 2.16.2 (with h2 4.4): closing an HTTP/2 response
    not read to its end only forgets the stream on the client side, it
    sends no ``RST_STREAM``. The server then never learns the stream was
    left: an SSE stream stays open there, still taking the queued messages
    and sending them where nobody reads (and the client drops them), so a
    GET opened again for the same queue gets its 200 but not the messages
    the abandoned stream took meanwhile. Over HTTP/1.1 closing the response
    closes its TCP connection, which the server sees.
    """
    try:
        yield response
    finally:
        if response.http_version == "HTTP/2":
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await _reset_h2_stream(response)


def h2_stream_parts(response: httpx2.Response) -> tuple[Any, Any, int] | None:
    """What resetting an HTTP/2 response's stream takes, in httpcore2: its
    HTTP/2 connection (``AsyncHTTP2Connection``: ``_h2_state``, h2's, and
    ``_write_outgoing_data``), the request (the body stream's ``_request``)
    and the stream id; ``None`` (logged) if httpcore2 no longer keeps them
    where it did."""
    lost = (
        "an HTTP/2 stream left early is not reset (the server keeps it open "
        "and may send it messages nobody reads)"
    )
    pooled = _httpcore_stream(response, lost)
    if pooled is None:
        return None
    h2_stream = getattr(pooled, "_stream", None)  # PoolByteStream's
    connection = getattr(h2_stream, "_connection", None)
    request = getattr(h2_stream, "_request", None)
    stream_id = response.extensions.get("stream_id")
    if (
        request is None
        or getattr(connection, "_h2_state", None) is None
        or not callable(getattr(connection, "_write_outgoing_data", None))
        or not isinstance(stream_id, int)
    ):
        _internals_moved("the HTTP/2 connection and request under an HTTP/2 stream", lost)
        return None
    return connection, request, stream_id


async def _reset_h2_stream(response: httpx2.Response) -> None:
    parts = h2_stream_parts(response)
    if parts is None:
        return
    connection, request, stream_id = parts
    try:
        connection._h2_state.reset_stream(stream_id, error_code=h2.errors.ErrorCodes.CANCEL)
    except h2.exceptions.ProtocolError:
        return  # the stream had ended (or the connection is gone)
    try:
        await connection._write_outgoing_data(request)
    except (*_HTTPCORE_ERRORS, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        _log.debug("RST_STREAM not sent: the connection broke: %r", exc)
    except Exception:
        _log.warning("RST_STREAM not sent", exc_info=True)


class HttpStatusError(trio.BrokenResourceError):
    """The server answered a POST with an unexpected status."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"the server answered {status}: {text.strip()}")
        self.status = status


class HttpMessages(MessageStream):
    """A Streamable HTTP connection as a
    :class:`~acp_trio._core._message_stream.MessageStream`. Made by
    :func:`open_http_stream`."""

    def __init__(
        self,
        client: httpx2.AsyncClient,
        sse_client: httpx2.AsyncClient,
        url: str,
        nursery: trio.Nursery,
        max_message_size: int,
        queue_size: int,
        max_backoff: float,
        resumable: bool = False,
        sse_client_factory: Callable[[], httpx2.AsyncClient] | None = None,
    ) -> None:
        self._resumable = resumable
        # Over HTTP/2: each SSE stream on an HTTP connection of its own.
        self._sse_client_factory = sse_client_factory
        # By stream: the SSE id of the last event received (resumable only).
        self._cursors: dict[str | None, str] = {}
        self._client = client
        self._sse_client = sse_client
        self._url = url
        self._nursery = nursery
        self._max_message_size = max_message_size
        self._max_backoff = max_backoff
        self._inbound_send, self._inbound = trio.open_memory_channel[bytes | OversizedFrame](
            queue_size
        )
        self._streams: set[str | None] = set()
        # The agent's session-scoped requests not answered yet: id -> session.
        self._request_session: dict[tuple[str, Any], str] = {}
        self._send_lock = trio.Lock()
        self._closed = False
        self._interrupted = False
        self._read_scope: trio.CancelScope | None = None
        self._broken: BaseException | None = None
        #: ``Acp-Connection-Id``, once ``initialize`` was answered.
        self.connection_id: str | None = None
        #: How many times an SSE stream was opened again after it dropped.
        self.reconnects = 0

    @property
    def max_message_size(self) -> int:
        return self._max_message_size

    @property
    def client(self) -> httpx2.AsyncClient:
        """The underlying httpx2 client (its cookies, its HTTP version)."""
        return self._client

    async def receive_message(self) -> bytes | OversizedFrame | None:
        if self._closed or self._interrupted:
            raise trio.ClosedResourceError("the connection was closed")
        with trio.CancelScope() as self._read_scope:
            try:
                return await self._inbound.receive()
            except trio.EndOfChannel:
                if self._broken is not None:
                    raise trio.BrokenResourceError(str(self._broken)) from self._broken
                return None
        raise trio.ClosedResourceError("reading was interrupted: the connection is closing")

    # A BufferedMessageStream: the events of one SSE chunk are queued
    # together (see _received), and the connection takes them together
    # too, rather than with a pass of the scheduler for each.

    def receive_message_nowait(self) -> bytes | OversizedFrame | None:
        """A message already received, if any, without waiting (``None``:
        use :meth:`receive_message`, which also reports the end)."""
        if self._closed or self._interrupted:
            return None
        try:
            return self._inbound.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return None

    @property
    def messages_pending(self) -> bool:
        """Whether messages received wait to be taken."""
        return self._inbound.statistics().current_buffer_used > 0

    def send_message_nowait(self, message: bytes) -> bool:
        """Never: each message is a POST, which waits for its answer."""
        return False

    def interrupt_reading(self) -> None:
        """Wake a task waiting in :meth:`receive_message` (it raises
        ``trio.ClosedResourceError``): the connection is closing, and nothing
        is read after this."""
        self._interrupted = True
        if self._read_scope is not None:
            self._read_scope.cancel()

    def _headers(self, session_id: str | None = None, *, post: bool = True) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"} if post else {}
        if self.connection_id is not None:
            headers[CONNECTION_ID] = self.connection_id
        if session_id is not None:
            headers[SESSION_ID] = session_id
        return headers

    async def send_message(self, message: bytes) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
        try:
            obj: Any = json.loads(message)
        except ValueError:
            obj = None
        session_id = session_of(obj) if isinstance(obj, dict) else None
        if session_id is None and isinstance(obj, dict) and "method" not in obj:
            # A reply to one of the agent's session-scoped requests.
            session_id = self._request_session.pop(id_key(obj.get("id")), None)
        if self.connection_id is None:
            # Only initialize goes before the connection exists; it is
            # answered in the POST's body.
            async with self._send_lock:
                if self.connection_id is None:
                    await self._initialize(message)
                    return
        if session_id is not None:
            self._open_stream(session_id)
        try:
            response = await self._client.post(
                self._url, content=message, headers=self._headers(session_id)
            )
        except httpx2.HTTPError as exc:
            raise trio.BrokenResourceError(f"POST failed: {exc}") from exc
        if response.status_code != 202:
            raise HttpStatusError(response.status_code, response.text)

    async def _initialize(self, message: bytes) -> None:
        try:
            response = await self._client.post(self._url, content=message, headers=self._headers())
        except httpx2.HTTPError as exc:
            raise trio.BrokenResourceError(f"POST failed: {exc}") from exc
        if response.status_code != 200:
            raise HttpStatusError(response.status_code, response.text)
        self.connection_id = response.headers.get(CONNECTION_ID)
        if self.connection_id is None:
            raise HttpStatusError(200, f"no {CONNECTION_ID} header in the reply to initialize")
        self._open_stream(None)
        await self._received(response.content)

    async def _received(self, data: bytes) -> None:
        if len(data) > self._max_message_size:
            await self._inbound_send.send(oversized(data, self._max_message_size))
            return
        # A new session's stream opens as soon as its id is seen; a reply to
        # one of the agent's requests goes with its session's header.
        if b'"sessionId"' in data and b'"session/update"' not in data:
            try:
                obj = json.loads(data)
            except ValueError:
                obj = None
            if isinstance(obj, dict) and "method" not in obj:
                result = obj.get("result")
                if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                    self._open_stream(result["sessionId"])
            elif isinstance(obj, dict) and "id" in obj:
                session_id = session_of(obj)
                if session_id is not None:
                    self._request_session[id_key(obj["id"])] = session_id
        try:
            # Without a checkpoint while there is room: the events of one
            # chunk are queued together, then read together.
            self._inbound_send.send_nowait(data)
        except trio.WouldBlock:
            await self._inbound_send.send(data)

    def _open_stream(self, session_id: str | None) -> None:
        if session_id in self._streams or self._closed:
            return
        self._streams.add(session_id)
        self._nursery.start_soon(self._read_stream, session_id)

    async def _read_stream(self, session_id: str | None) -> None:
        """Read one SSE stream for the connection's life, opening it again
        (backoff with jitter) when it drops."""
        if self._sse_client_factory is None:
            await self._read_stream_on(self._sse_client, session_id)
            return
        async with self._sse_client_factory() as client:
            await self._read_stream_on(client, session_id)

    async def _read_stream_on(self, sse_client: httpx2.AsyncClient, session_id: str | None) -> None:
        failures = 0
        while not self._closed:
            try:
                headers = {**self._headers(session_id, post=False), "Accept": "text/event-stream"}
                cursor = self._cursors.get(session_id)
                if cursor is not None:
                    headers["Last-Event-ID"] = cursor
                async with (
                    sse_client.stream(
                        "GET", self._url, headers=headers, timeout=httpx2.Timeout(30, read=None)
                    ) as response,
                    reset_when_left(response),
                ):
                    status = response.status_code
                    if status in _FATAL:
                        text = "the SSE stream was refused"
                        if status == 409:
                            text = f"the SSE stream cannot be resumed after event {cursor}"
                        await self._fail(HttpStatusError(status, text))
                        return
                    if status != 200:
                        raise HttpStatusError(status, "the SSE stream was refused")
                    failures = 0
                    decoder = SseDecoder(library_limit(self._max_message_size))
                    async with aclosing(raw_chunks(response)) as chunks:
                        async for chunk in chunks:
                            for data in decoder.feed(chunk):
                                await self._received(data)
                            # Every event fed so far was handed on.
                            if self._resumable and decoder.last_id is not None:
                                self._cursors[session_id] = decoder.last_id
            except (httpx2.HTTPError, *_HTTPCORE_ERRORS, HttpStatusError, SseTooLarge) as exc:
                # (httpcore2's own errors: raw_chunks reads below httpx2.)
                _log.debug("SSE stream %s dropped: %s", session_id, exc)
            except trio.ClosedResourceError:
                if self._broken is None and not self._closed:
                    raise
                # Another stream failed the connection, or it is being
                # closed while this one waited for room in the full queue
                # (a caller that left with messages unread).
                return
            failures += 1
            self.reconnects += 1
            delay = min(self._max_backoff, 0.05 * 2 ** min(failures, 10))
            await trio.sleep(delay * (0.5 + random.random() / 2))

    async def _fail(self, error: BaseException) -> None:
        if self._broken is None:
            self._broken = error
        self._inbound_send.close()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            if self.connection_id is not None:
                try:
                    await self._client.delete(self._url, headers=self._headers(post=False))
                except httpx2.HTTPError as exc:
                    _log.debug("DELETE failed: %s", exc)
        self._inbound_send.close()
        self._nursery.cancel_scope.cancel()


#: The TLS context of every client left to verify as by default, made once
#: (see :func:`tls_context`).
_default_tls: ssl.SSLContext | None = None


def tls_context(verify: ssl.SSLContext | bool) -> ssl.SSLContext | bool:
    """What each HTTP client of a connection is given as ``verify``:
    ``True`` becomes one default context (httpx2's, the system's
    certificate store) made on first use and shared by every client
    after it. httpx2 makes a context for each client it builds, and loading
    the certificate store costs some 20 to 60 ms of CPU: two or three
    clients to a connection, so 1,000 connections opened at once spent most
    of a minute in it (benchmarks/bench_scale.py), ``http://`` URLs too."""
    global _default_tls
    if verify is not True:
        return verify
    if _default_tls is None:
        _default_tls = httpx2.create_ssl_context(verify=True)
    return _default_tls


#: Seconds an idle HTTP connection is kept for the next request. Below the
#: 5 s after which hypercorn (our server), uvicorn and Node's http server
#: close an idle connection: with the same figure on both sides, a request
#: sent as the server closes its connection was lost to a broken pipe
#: (h2c, 1,000 clients opening at once: 36 to 657 connections).
KEEPALIVE_EXPIRY = 4.0


@asynccontextmanager
async def open_http_stream(
    url: str,
    *,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    http2: bool = True,
    queue_size: int = 64,
    max_backoff: float = 5.0,
    verify: ssl.SSLContext | bool = True,
    resumable: bool = False,
    keepalive_expiry: float = KEEPALIVE_EXPIRY,
) -> AsyncIterator[HttpMessages]:
    """Open a Streamable HTTP connection to an ACP server
    (``http://host:port/acp``) for the duration of the block, as a message
    stream for :func:`~acp_trio.open_agent` or
    :func:`~acp_trio.lowlevel.open_connection`. Nothing is sent until the first
    message, which must be ``initialize``.

    ``http2=True`` speaks HTTP/2 (h2c, prior knowledge, on ``http:``);
    ``False`` HTTP/1.1. Cookies the server sets are kept and sent back for
    the connection's life. A dropped SSE stream is opened again, with
    exponential backoff and jitter up to ``max_backoff`` seconds (messages
    the server sent meanwhile are lost, as the RFD's v1 says; those it had
    not sent yet wait for the new stream). With ``resumable=True`` (for a
    server serving resumable streams; provisional, from the draft after the
    RFD) the stream is opened again with ``Last-Event-ID``, so the server
    replays what was sent after it: nothing is lost, nothing comes twice;
    if the server no longer holds that event (``409``), the stream fails
    with :class:`HttpStatusError` (``open_remote_agent(reconnect=...)``
    then reconnects). An HTTP connection idle for ``keepalive_expiry``
    seconds is not used again (keep it below the server's idle timeout, 5 s
    for hypercorn, so no request goes out on a connection the server is
    closing). Leaving the block sends DELETE,
    also when it is left by an exception or a cancellation (shielded and
    bounded); cancelling a wait on the stream loses no message.
    """
    plain = url.startswith("http://")
    common: dict[str, Any] = {
        "http1": not (http2 and plain),
        "http2": http2,
        "headers": {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})},
        "timeout": httpx2.Timeout(60),
        "verify": tls_context(verify),
        "limits": httpx2.Limits(keepalive_expiry=keepalive_expiry),
    }
    client = httpx2.AsyncClient(**common)
    # The SSE streams get an HTTP connection of their own (sharing the
    # cookie jar): POSTs multiplexed with long-lived streams on one h2
    # connection could stall under httpcore2 (seen on loopback). Over
    # HTTP/2, each SSE stream gets one of its own too: httpcore2 (2.17, as
    # httpcore) lets one stream's task read the connection for all, under
    # a lock, and a stream whose event another task already read waits for
    # that lock behind a stream blocked reading the socket: with two
    # sessions (three streams) a reply sat in the client's queue for its
    # stream, never read (issue 37).
    sse_client = httpx2.AsyncClient(cookies=client.cookies.jar, **common)

    def sse_client_factory() -> httpx2.AsyncClient:
        return httpx2.AsyncClient(cookies=client.cookies.jar, **common)

    per_stream = http2  # (over https, HTTP/2 when the server agrees)
    with plain_exceptions():
        async with client, sse_client, trio.open_nursery() as nursery:
            stream = HttpMessages(
                client,
                sse_client,
                url,
                nursery,
                max_message_size,
                queue_size,
                max_backoff,
                resumable,
                sse_client_factory if per_stream else None,
            )
            try:
                yield stream
            finally:
                await stream.aclose()
