"""An agent on run_agent shuts down in order on SIGTERM and SIGINT."""

from __future__ import annotations

import signal
import sys

import pytest
import trio

from acp_trio.testing import open_scripted_process

AGENT = [sys.executable, "-m", "acp_trio", "scenario-agent"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_answers_the_running_prompt_and_exits(signum: int) -> None:
    with trio.fail_after(20):
        async with open_scripted_process(AGENT) as peer:
            init = await peer.request("initialize", {"protocolVersion": 1})
            await peer.receive_response(init)
            new = await peer.request("session/new", {"cwd": "/", "mcpServers": []})
            session = (await peer.receive_response(new))["result"]["sessionId"]
            prompt = await peer.request(
                "session/prompt",
                {"sessionId": session, "prompt": [{"type": "text", "text": "sleep 100000"}]},
            )
            await trio.sleep(0.3)
            agent = peer.process
            assert agent is not None
            agent.process.send_signal(signum)
            reply = await peer.receive_response(prompt)
            assert reply["error"]["code"] == -32800
            await peer.expect_eof()
            code = await agent.process.wait()
    if signum == signal.SIGTERM:
        assert code == 0
    else:
        assert code in (-signal.SIGINT, 130, 1)
