"""Client-side helpers built on the typed API, for applications.

- :class:`SessionAccumulator` / :class:`SessionStates`: a session's state
  (messages, tool calls, plan, mode, usage, ...) folded from its
  ``session/update`` notifications.
"""

from acp_trio.contrib._session_state import Compaction as Compaction
from acp_trio.contrib._session_state import Message as Message
from acp_trio.contrib._session_state import SessionAccumulator as SessionAccumulator
from acp_trio.contrib._session_state import SessionStates as SessionStates
from acp_trio.contrib._session_state import ToolCallState as ToolCallState
