"""The libraries' floor under acp_trio's remote transports: a bare ASGI app
under hypercorn (Trio worker, its own process) pushes N small text
messages over a WebSocket to a bare trio-websocket client, or N SSE events
(one body chunk each) to a bare httpx2 client over HTTP/1.1; no JSON-RPC,
no acp_trio. Prints the median ms per N messages.

    python benchmarks/remote_floor.py [N] [RUNS]
"""

from __future__ import annotations

import functools
import json
import statistics
import subprocess
import sys
import time

import trio

MESSAGE = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":' + (
    '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"0123456789abcdef"}}}}'
)


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] == "lifespan":
        while (event := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    n = int(scope["path"].rsplit("/", 1)[1])
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept"})
        while (event := await receive())["type"] == "websocket.receive":
            for _ in range(n):
                await send({"type": "websocket.send", "text": MESSAGE})
        return
    await receive()
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    event = b"data: " + MESSAGE.encode() + b"\n\n"
    for _ in range(n):
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def serve() -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(hypercorn_serve, app, config))
        print(json.dumps({"url": binds[0]}), flush=True)


async def measure(url: str, n: int, runs: int) -> tuple[float, float]:
    import httpx2
    import trio_websocket

    ws_times = []
    async with trio_websocket.open_websocket_url(url.replace("http", "ws") + f"/{n}") as ws:
        for _ in range(runs + 1):
            start = time.perf_counter()
            await ws.send_message("go")
            for _ in range(n):
                await ws.get_message()
            ws_times.append((time.perf_counter() - start) * 1000)
    sse_times = []
    async with httpx2.AsyncClient() as client:
        for _ in range(runs + 1):
            start = time.perf_counter()
            seen = 0
            async with client.stream("GET", url + f"/{n}") as response:
                async for chunk in response.aiter_raw():
                    seen += chunk.count(b"\n\n")
            assert seen == n
            sse_times.append((time.perf_counter() - start) * 1000)
    return statistics.median(ws_times[1:]), statistics.median(sse_times[1:])


def main(n: int, runs: int) -> None:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        url = json.loads(process.stdout.readline())["url"]
        ws_ms, sse_ms = trio.run(measure, url, n, runs)
    finally:
        process.terminate()
        process.wait()
    print(f"floor, {n} messages server -> client:", end=" ")
    print(f"WebSocket {ws_ms:.1f} ms, SSE over HTTP/1.1 {sse_ms:.1f} ms")


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        trio.run(serve)
    else:
        args = [int(a) for a in sys.argv[1:]]
        main(*(args + [2000, 7][len(args) :]))
