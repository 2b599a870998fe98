"""``Connection.fail_request``: a transport that knows a reply is lost
settles the pending call with its own error, as if the reply had come."""

from __future__ import annotations

import trio
import trio.testing

import acp_trio
from acp_trio.testing import open_memory_pair


class Lost(acp_trio.ConnectionClosed):
    pass


async def test_a_pending_call_fails_with_the_error_given() -> None:
    with trio.fail_after(10):
        async with open_memory_pair() as pair:
            connection = pair.to_agent.connection
            session = await pair.to_agent.new_session(cwd="/")
            failures: list[BaseException] = []
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    try:
                        await pair.to_agent.prompt_text(session.session_id, "wait_for_cancel")
                    except Lost as exc:
                        failures.append(exc)

                nursery.start_soon(run)
                await trio.testing.wait_all_tasks_blocked()
                (node,) = connection.request_tree()
                assert connection.fail_request(node.id, Lost("gone"))
                # Settled once: a second time, or an unknown id, is refused.
                assert not connection.fail_request(node.id, Lost("again"))
                assert not connection.fail_request(12345, Lost("never sent"))
            (failure,) = failures
            assert str(failure) == "gone"
            assert not connection.request_tree()
            # The agent's late answer to it is dropped; the connection goes on.
            await pair.to_agent.cancel(session.session_id)
            result = await pair.to_agent.prompt_text(session.session_id, "echo on")
            assert result.stop_reason == "end_turn"
