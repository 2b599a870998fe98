"""The attacks of issue 47, one per run, from their own process and their
own address (127.0.0.2: another client than the good one, on 127.0.0.1):

    python tests/attacks/attacker.py CASE URL TOKEN

runs ``CASE`` against the server at ``URL`` (``http://HOST:PORT``) until it
is killed, printing one JSON line of what it saw when it has something to
say (``{"held": seconds}`` for the slow head, counts of statuses, ...).
"""

from __future__ import annotations

import json
import resource
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.settings
import trio

from acp_trio.remote import open_websocket_stream

SOURCE = "127.0.0.2"
MiB = 1024 * 1024
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def report(**what: Any) -> None:
    print(json.dumps(what), flush=True)


async def connect(base: str) -> trio.SocketStream:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    sock = trio.socket.socket()
    await sock.bind((SOURCE, 0))
    await sock.connect((host, int(port)))
    return trio.SocketStream(sock)


def head(method: str, headers: dict[str, str], path: str = "/acp") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def read_status(stream: trio.SocketStream) -> int:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some()
        if not chunk:
            return 0
        data += chunk
    return int(data.split(b" ", 2)[1])


async def forever(task: Callable[[], Awaitable[None]], count: int) -> None:
    """``count`` copies of ``task``, each started again when it ends."""

    async def loop() -> None:
        while True:
            try:
                await task()
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                await trio.sleep(0.05)

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(loop)


# 1. Bodies that stop coming, without the token.
async def slow_body(base: str, token: str) -> None:
    async def one() -> None:
        async with await connect(base) as stream:
            body = head("POST", {**JSON, "Content-Length": "100"}) + b"{"
            await stream.send_all(body)
            await read_status(stream)
            while await stream.receive_some():
                pass

    await forever(one, 1100)


# 2. Agents: initialize after initialize, from one address.
async def agents(base: str, token: str) -> None:
    statuses: Counter[int] = Counter()
    body = dumps(INIT)
    auth = {"Authorization": f"Bearer {token}"}

    async def one() -> None:
        stream = await connect(base)
        data = head("POST", {**JSON, **auth, "Content-Length": str(len(body))}) + body
        await stream.send_all(data)
        statuses[await read_status(stream)] += 1
        await trio.sleep_forever()  # (the agent stays, idle)

    async with trio.open_nursery() as nursery:
        for _ in range(300):
            nursery.start_soon(one)
        await trio.sleep(3)
        report(statuses=dict(statuses))


class H2:
    def __init__(self, stream: trio.SocketStream, window: int) -> None:
        self.stream = stream
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.local_settings = h2.settings.Settings(
            client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window}
        )
        self.conn.initiate_connection()
        self.headers: dict[int, dict[bytes, bytes]] = {}
        self.bodies: dict[int, bytearray] = {}
        self.ended: set[int] = set()
        self.ack = window > 0

    async def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            await self.stream.send_all(data)

    def request(self, method: str, headers: dict[str, str], body: bytes | None = None) -> int:
        sid: int = self.conn.get_next_available_stream_id()
        pairs = [
            (b":method", method.encode()),
            (b":path", b"/acp"),
            (b":scheme", b"http"),
            (b":authority", b"127.0.0.1"),
        ] + [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        self.conn.send_headers(sid, pairs, end_stream=body is None)
        if body is not None:
            self.conn.send_data(sid, body, end_stream=True)
        self.bodies[sid] = bytearray()
        return sid

    async def read(self) -> None:
        data = await self.stream.receive_some()
        if not data:
            raise trio.BrokenResourceError("closed")
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                self.headers[event.stream_id] = dict(event.headers)
            elif isinstance(event, h2.events.DataReceived):
                self.bodies.setdefault(event.stream_id, bytearray()).extend(event.data)
                if self.ack:
                    self.conn.acknowledge_received_data(
                        event.flow_controlled_length, event.stream_id
                    )
            elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                self.ended.add(event.stream_id)
        await self.flush()

    async def until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self.read()


# 3. An h2c reader whose window stays shut, its agent streaming.
async def zero_window(base: str, token: str) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    a = H2(await connect(base), 65535)
    await a.flush()
    init = a.request("POST", {**JSON, **auth}, dumps(INIT))
    await a.flush()
    await a.until(lambda: init in a.ended)
    cid = a.headers[init][b"acp-connection-id"].decode()
    ids = {"Acp-Connection-Id": cid, **auth}
    events = a.request("GET", {**ids, "Accept": "text/event-stream"})
    new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/"}}
    new["params"]["mcpServers"] = []  # type: ignore[index]
    a.request("POST", {**JSON, **ids}, dumps(new))
    await a.flush()
    await a.until(lambda: b'"sessionId"' in a.bodies[events])
    text = a.bodies[events].decode()
    session = text.split('"sessionId":"', 1)[1].split('"', 1)[0]
    b = H2(await connect(base), 0)  # never opens its window
    await b.flush()
    b.request("GET", {**ids, "Accept": "text/event-stream", "Acp-Session-Id": session})
    await b.flush()
    prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt"}
    prompt["params"] = {
        "sessionId": session,
        "prompt": [{"type": "text", "text": "stream 200000 100000"}],
    }
    a.request("POST", {**JSON, **ids, "Acp-Session-Id": session}, dumps(prompt))
    await a.flush()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.until, lambda: False)
        nursery.start_soon(b.until, lambda: False)


def many_values(request_id: int, size: int) -> bytes:
    head_ = b'{"jsonrpc":"2.0","id":%d,"method":"x/y","params":{"a":[' % request_id
    count = (size - len(head_)) // 3
    return head_ + b"{}," * (count - 1) + b"{}]}}"


# 4. Messages within the cap whose structure costs many times their size.
async def amplify(base: str, token: str) -> None:
    frame = many_values(7, 10 * MiB)
    auth = {"Authorization": f"Bearer {token}"}
    ws_url = base.replace("http://", "ws://") + "/acp"

    async def over_websocket() -> None:
        async with open_websocket_stream(ws_url, token=token) as stream:
            await stream.send_message(dumps(INIT))
            await stream.receive_message()
            while True:
                await stream.send_message(frame)
                await stream.receive_message()

    async def over_post() -> None:
        async with await connect(base) as stream:
            body = dumps(INIT)
            await stream.send_all(
                head("POST", {**JSON, **auth, "Content-Length": str(len(body))}) + body
            )
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive_some()
            cid = data.split(b"acp-connection-id: ", 1)[1].split(b"\r\n", 1)[0].decode()
        while True:
            async with await connect(base) as stream:
                headers = {**JSON, **auth, "Acp-Connection-Id": cid}
                await stream.send_all(
                    head("POST", {**headers, "Content-Length": str(len(frame))}) + frame
                )
                if await read_status(stream) != 202:
                    await trio.sleep(0.1)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forever, over_websocket, 1)
        nursery.start_soon(forever, over_post, 1)


# 5. Huge bodies without the token, with and without Expect: 100-continue.
async def refused_body(base: str, token: str) -> None:
    chunk = b"x" * 65536

    def with_expect(expect: bool) -> Callable[[], Awaitable[None]]:
        async def one() -> None:
            async with await connect(base) as stream:
                headers = {**JSON, "Content-Length": str(4 * 1024**3)}
                if expect:
                    headers["Expect"] = "100-continue"
                await stream.send_all(head("POST", headers))
                async with trio.open_nursery() as nursery:

                    async def read() -> None:
                        while await stream.receive_some():
                            pass
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(read)
                    while True:
                        await stream.send_all(chunk)

        return one

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forever, with_expect(False), 10)
        nursery.start_soon(forever, with_expect(True), 10)


def prompt_of(request_id: int, session: str, text: str, pad: int = 0) -> bytes:
    blocks = [{"type": "text", "text": text}]
    if pad:
        blocks.append({"type": "text", "text": "p" * pad})
    message = {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt"}
    message["params"] = {"sessionId": session, "prompt": blocks}
    return dumps(message)


async def ws_session(stream: Any) -> str:
    await stream.send_message(dumps(INIT))
    await stream.receive_message()
    new = {"jsonrpc": "2.0", "id": 1, "method": "session/new"}
    new["params"] = {"cwd": "/", "mcpServers": []}
    await stream.send_message(dumps(new))
    while True:
        reply = json.loads(await stream.receive_message())
        if reply.get("id") == 1:
            return str(reply["result"]["sessionId"])


# 6. Requests held: prompts of 1 MB that wait.
async def held(base: str, token: str) -> None:
    ws_url = base.replace("http://", "ws://") + "/acp"
    async with open_websocket_stream(ws_url, token=token) as stream:
        session = await ws_session(stream)
        refused = 0
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                nonlocal refused
                while True:
                    message = await stream.receive_message()
                    if message is not None and b'"error"' in message:
                        refused += 1

            nursery.start_soon(read)
            for n in range(400):
                await stream.send_message(prompt_of(100 + n, session, "wait_for_cancel", MiB))
            await trio.sleep(2)
            report(refused=refused, sent=400)


# 7. Messages at the cap, back to back (their parse is the server's time).
async def large_messages(base: str, token: str) -> None:
    ws_url = base.replace("http://", "ws://") + "/acp"

    async def one() -> None:
        async with open_websocket_stream(ws_url, token=token) as stream:
            session = await ws_session(stream)
            n = 100
            while True:
                n += 1
                await stream.send_message(prompt_of(n, session, "sleep 0", 16 * MiB - 400))
                while True:
                    reply = json.loads(await stream.receive_message())
                    if reply.get("id") == n:
                        break

    await forever(one, 2)


# 10. Malformed ids, as fast as they go.
async def malformed_ids(base: str, token: str) -> None:
    auth = {"Authorization": f"Bearer {token}"}

    async def one() -> None:
        async with await connect(base) as stream:
            body = dumps(INIT)
            await stream.send_all(
                head("POST", {**JSON, **auth, "Content-Length": str(len(body))}) + body
            )
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive_some()
            cid = data.split(b"acp-connection-id: ", 1)[1].split(b"\r\n", 1)[0].decode()
        async with await connect(base) as stream:
            message = {"jsonrpc": "2.0", "id": {"a": 1}, "method": "session/prompt"}
            message["params"] = {"sessionId": "s", "prompt": []}
            body = dumps(message)
            request = head(
                "POST",
                {**JSON, **auth, "Acp-Connection-Id": cid, "Content-Length": str(len(body))},
            )
            while True:
                await stream.send_all(request + body)
                await read_status(stream)

    await forever(one, 4)


# 11. h2c GET bodies after their 404.
async def late_body(base: str, token: str) -> None:
    auth = {"Authorization": f"Bearer {token}"}

    async def one() -> None:
        client = H2(await connect(base), 65535)
        await client.flush()
        while True:
            sid = client.conn.get_next_available_stream_id()
            pairs = [
                (b":method", b"GET"),
                (b":path", b"/acp"),
                (b":scheme", b"http"),
                (b":authority", b"127.0.0.1"),
                (b"accept", b"text/event-stream"),
                (b"acp-connection-id", b"nope"),
                (b"authorization", auth["Authorization"].encode()),
            ]
            client.conn.send_headers(sid, pairs, end_stream=False)
            await client.flush()
            await client.until(lambda sid=sid: sid in client.ended)
            frame = b"\x00\x00\x04\x00\x01" + sid.to_bytes(4, "big") + b"late"
            await client.stream.send_all(frame)

    await forever(one, 4)


# 12. POSTs nested 100,000 deep.
async def deep(base: str, token: str) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    nested = b'{"jsonrpc":"2.0","id":3,"method":"x","params":{"a":' + b"[" * 100_000
    nested += b"]" * 100_000 + b"}}"

    async def one() -> None:
        async with await connect(base) as stream:
            body = dumps(INIT)
            await stream.send_all(
                head("POST", {**JSON, **auth, "Content-Length": str(len(body))}) + body
            )
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive_some()
            cid = data.split(b"acp-connection-id: ", 1)[1].split(b"\r\n", 1)[0].decode()
        async with await connect(base) as stream:
            request = head(
                "POST",
                {**JSON, **auth, "Acp-Connection-Id": cid, "Content-Length": str(len(nested))},
            )
            while True:
                await stream.send_all(request + nested)
                await read_status(stream)

    await forever(one, 2)


# 13. Bodies of 1-byte chunks.
async def one_byte_chunks(base: str, token: str) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    body = dumps({**INIT, "params": {**INIT["params"], "pad": "p" * 200_000}})  # type: ignore[dict-item]
    chunks = b"".join(b"1\r\n%s\r\n" % body[i : i + 1] for i in range(len(body))) + b"0\r\n\r\n"
    request = head("POST", {**JSON, **auth, "Transfer-Encoding": "chunked"})

    async def one() -> None:
        async with await connect(base) as stream:
            await stream.send_all(request)
            for start in range(0, len(chunks), 6000):
                await stream.send_all(chunks[start : start + 6000])
                await trio.sleep(0.01)
            await read_status(stream)

    await forever(one, 20)


# 14. Heads at a byte a second: how long the server holds each.
async def slow_head(base: str, token: str) -> None:
    data = head("POST", {**JSON, "Content-Length": "2"}) + b"{}"
    held: list[float] = []

    async def one() -> None:
        async with await connect(base) as stream:
            start = trio.current_time()
            try:
                async with trio.open_nursery() as nursery:

                    async def read() -> None:
                        while await stream.receive_some():
                            pass
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(read)
                    for byte in data:
                        await stream.send_all(bytes([byte]))
                        await trio.sleep(1)
            except (trio.BrokenResourceError, OSError):
                pass
            held.append(trio.current_time() - start)
            if len(held) % 20 == 0:
                report(held_max=max(held), held_median=sorted(held)[len(held) // 2])

    await forever(one, 200)


ATTACKS = {
    "slow-body": slow_body,
    "agents": agents,
    "zero-window": zero_window,
    "amplify": amplify,
    "refused-body": refused_body,
    "held": held,
    "large-messages": large_messages,
    "malformed-ids": malformed_ids,
    "late-body": late_body,
    "deep": deep,
    "one-byte-chunks": one_byte_chunks,
    "slow-head": slow_head,
}


def main() -> None:
    case, base, token = sys.argv[1:4]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    trio.run(ATTACKS[case], base, token)


if __name__ == "__main__":
    main()
