"""docs/from-asyncio.md: acp_trio in an asyncio application (Trio's guest
mode). The page's files are written out as printed, type-checked, and run:
its asyncio client against the scenario agent (the output the page shows),
its agent with an asyncio model (cancelled by its client, checked by
check-agent, shut down by SIGTERM); and the bridge's promises, one by one,
in asyncio runs of their own."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import shlex
import signal
import subprocess
import sys
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import acp_trio
from acp_trio.testing import ScenarioClient

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "from-asyncio.md"
LIMIT = 180  # real seconds: processes on a loaded machine (a watchdog)

HELD = ("terminal/create", "session/request_permission", "fs/read_text_file")
_FILE = re.compile(r"<!-- file: ([\w./-]+) -->\n+```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def page_files() -> dict[str, str]:
    text = PAGE.read_text()
    files = {m[1]: m[2] for m in _FILE.finditer(text)}
    # Every python block is one of the files (nothing printed goes untested).
    assert text.count("```python") == len(files)
    return files


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)


@pytest.fixture
def written(tmp_path: Path) -> Path:
    for name, code in page_files().items():
        (tmp_path / name).write_text(code)
    return tmp_path


def command(line: str) -> list[str]:
    """A command of the page, with this interpreter for ``python``."""
    line = line.replace("\"$(seq -s ' ' 100)\"", shlex.quote(" ".join(map(str, range(1, 101)))))
    return [sys.executable if word == "python" else word for word in shlex.split(line)]


async def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(LIMIT):
        return await trio.run_process(
            argv, cwd=cwd, capture_stdout=True, capture_stderr=True, check=False
        )


def test_the_page_has_its_three_files() -> None:
    assert sorted(page_files()) == ["asyncio_agent.py", "asyncio_client.py", "trio_host.py"]


async def test_the_page_type_checks(written: Path) -> None:
    files = sorted(page_files())
    result = await run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files], written
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


async def test_the_client_prints_what_the_page_says(written: Path) -> None:
    (line, _) = blocks("sh")
    assert line.startswith("python asyncio_client.py ")
    result = await run(command(line), written)
    assert result.returncode == 0, result.stderr.decode()
    (expected,) = blocks("text")
    assert result.stdout.decode() == expected


async def test_the_agent_cancels_its_asyncio_model_with_the_turn(
    written: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    client = ScenarioClient()
    agent_command = [sys.executable, str(written / "asyncio_agent.py")]
    with trio.fail_after(LIMIT):
        async with acp_trio.open_spawned_agent(client, agent_command) as agent:
            await agent.initialize()
            sid = (await agent.new_session("/")).session_id
            result = await agent.prompt_text(sid, "one two three")
            assert (client.texts(sid), result.stop_reason) == (
                ["one ", "two ", "three "],
                "end_turn",
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.prompt_text, sid, " ".join(map(str, range(1000))))
                while len(client.texts(sid)) < 5:  # noqa: ASYNC110 (updates set no event)
                    await trio.sleep(0.01)
                cancelled = await agent.cancel_turn(sid)
            assert cancelled.stop_reason == "cancelled"
            streamed = len(client.texts(sid))
            assert streamed < 3 + 1000
            # The session goes on after the cancel.
            again = await agent.prompt_text(sid, "again")
            assert (client.texts(sid)[-1], again.stop_reason) == ("again ", "end_turn")
    assert "model: cancelled" in capfd.readouterr().err


@pytest.mark.slow
async def test_the_agent_conforms(written: Path) -> None:
    (_, line) = blocks("sh")
    assert line.startswith("python -m acp_trio check-agent ")
    result = await run(command(line), written)
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    assert "CONFORMS" in out
    assert re.search(r"^session-cancel\s+required\s+PASS", out, flags=re.MULTILINE), out


def agent_line(
    process: subprocess.Popen[bytes], request_id: int, method: str, params: dict[str, Any]
) -> None:
    assert process.stdin is not None
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    process.stdin.write((json.dumps(message) + "\n").encode())
    process.stdin.flush()


def test_sigterm_stops_the_agent_in_order(written: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "asyncio_agent.py"],
        cwd=written,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        agent_line(process, 0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert json.loads(process.stdout.readline())["id"] == 0
        agent_line(process, 1, "session/new", {"cwd": "/", "mcpServers": []})
        sid = json.loads(process.stdout.readline())["result"]["sessionId"]
        words = {"type": "text", "text": " ".join(map(str, range(1000)))}
        agent_line(process, 2, "session/prompt", {"sessionId": sid, "prompt": [words]})
        assert json.loads(process.stdout.readline())["method"] == "session/update"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=LIMIT)
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err.decode()
    replies = [json.loads(line) for line in out.splitlines()]
    assert replies[-1]["id"] == 2
    assert replies[-1]["error"]["code"] == -32800
    assert b"model: cancelled" in err


# -- the bridge's promises, in asyncio runs of their own --------------------------------------


@pytest.fixture
def bridge(written: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("trio_host", written / "trio_host.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["trio_host"] = module
    spec.loader.exec_module(module)
    return module


def in_asyncio(main: Callable[[], Awaitable[Any]]) -> Any:
    async def watched() -> Any:
        async with asyncio.timeout(LIMIT):
            return await main()

    return asyncio.run(watched())


def test_an_asyncio_cancel_cancels_the_trio_call_and_waits_for_it(bridge: Any) -> None:
    seen: list[str] = []

    async def trio_side() -> None:
        try:
            await trio.sleep_forever()
        finally:
            seen.append("trio: cancelled")
            with trio.CancelScope(shield=True):
                await trio.sleep(0.05)  # still cleaning up when asyncio asks
            seen.append("trio: cleaned up")

    async def main() -> None:
        async with bridge.open_trio_host() as host:
            task = asyncio.create_task(host.run(trio_side))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            seen.append("asyncio: cancelled")
            # asyncio.timeout: the same, as TimeoutError
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await host.run(trio_side)

    in_asyncio(main)
    once = ["trio: cancelled", "trio: cleaned up"]
    assert seen == [*once, "asyncio: cancelled", *once]


def test_a_trio_cancel_cancels_the_asyncio_task_and_waits_for_it(bridge: Any) -> None:
    seen: list[str] = []

    async def asyncio_side() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("asyncio: cancelled")
            await asyncio.sleep(0.05)  # still cleaning up
            seen.append("asyncio: cleaned up")
            raise

    async def trio_side() -> str:
        with trio.move_on_after(0.05) as scope:
            await bridge.run_asyncio(asyncio_side())
        seen.append("trio: moved on")
        assert scope.cancelled_caught
        return "done"

    async def main() -> str:
        async with bridge.open_trio_host() as host:
            result: str = await host.run(trio_side)
            return result

    assert in_asyncio(main) == "done"
    assert seen == ["asyncio: cancelled", "asyncio: cleaned up", "trio: moved on"]


def test_results_and_errors_cross_both_ways(bridge: Any) -> None:
    async def asyncio_fails() -> None:
        await asyncio.sleep(0)
        raise KeyError("from asyncio")

    async def trio_side(x: int) -> int:
        with pytest.raises(KeyError, match="from asyncio"):
            await bridge.run_asyncio(asyncio_fails())
        return x + int(await bridge.run_asyncio(asyncio.sleep(0, "1")))

    async def trio_fails() -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("from trio")

    async def main() -> int:
        async with bridge.open_trio_host() as host:
            with pytest.raises(ValueError, match="from trio"):
                await host.run(trio_fails)
            result: int = await host.run(trio_side, 41)
            return result

    assert in_asyncio(main) == 42


def test_closing_the_host_cancels_what_still_runs(bridge: Any) -> None:
    async def main() -> None:
        async with bridge.open_trio_host() as host:
            task = asyncio.create_task(host.run(trio.sleep_forever))
            await asyncio.sleep(0.05)
        # The run is over: the call was cancelled by the Trio side.
        with pytest.raises(asyncio.CancelledError):
            await task

    in_asyncio(main)


def test_sniffio_names_each_side(bridge: Any) -> None:
    import sniffio

    async def asyncio_side() -> str:
        return sniffio.current_async_library()

    async def trio_side() -> tuple[str, str]:
        return sniffio.current_async_library(), await bridge.run_asyncio(asyncio_side())

    async def main() -> tuple[str, tuple[str, str]]:
        async with bridge.open_trio_host() as host:
            return sniffio.current_async_library(), await host.run(trio_side)

    assert in_asyncio(main) == ("asyncio", ("trio", "asyncio"))


def test_the_remote_transports_work_in_the_guest_run(bridge: Any) -> None:
    # Both ends in the guest run: hypercorn's server, our WebSocket and
    # httpx2's HTTP client; a turn cancelled by a Trio deadline.
    import functools

    from acp_trio.remote import agent_app, open_remote_agent, serve_remote
    from acp_trio.testing import ScenarioAgent

    async def remote(profile: str) -> tuple[str, list[str]]:
        async with trio.open_nursery() as nursery:
            serve = functools.partial(serve_remote, agent_app(ScenarioAgent), 0, host="127.0.0.1")
            binds = await nursery.start(serve)
            client = ScenarioClient()
            async with open_remote_agent(client, binds[0] + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
                await agent.initialize(client.initialize_request())
                sid = (await agent.new_session("/")).session_id
                async with trio.open_nursery() as turn:
                    turn.start_soon(agent.prompt_text, sid, "nested")
                    for method in HELD:
                        await client.wait_for_requests(method)
                    turn.cancel_scope.cancel()  # session/cancel goes out
                result = await agent.prompt_text(sid, "echo after")
            nursery.cancel_scope.cancel()
        return result.stop_reason, sorted(client.cancelled)

    async def main() -> list[tuple[str, list[str]]]:
        async with bridge.open_trio_host() as host:
            return [await host.run(remote, profile) for profile in ("websocket", "http")]

    held = sorted(HELD)
    assert in_asyncio(main) == [("end_turn", held), ("end_turn", held)]
