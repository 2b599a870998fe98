"""Client-side helpers for ACP v2 sessions.

:class:`SessionAccumulator` / :class:`SessionStates`: a v2 session's state
folded from its ``session/update`` upserts (three-state patches: absent
unchanged, ``null`` cleared, a value replaced; chunks appended), with the
turn's state and background work. The v1 helpers are in
:mod:`acp_trio.contrib`; the two never share classes.
"""

from acp_trio.contrib._session_state_v2 import Compaction as Compaction
from acp_trio.contrib._session_state_v2 import Message as Message
from acp_trio.contrib._session_state_v2 import SessionAccumulator as SessionAccumulator
from acp_trio.contrib._session_state_v2 import SessionStates as SessionStates
from acp_trio.contrib._session_state_v2 import TerminalState as TerminalState
from acp_trio.contrib._session_state_v2 import ToolCallState as ToolCallState
from acp_trio.contrib._session_state_v2 import patch as patch
from acp_trio.contrib._session_state_v2 import patch_list as patch_list
from acp_trio.contrib._session_state_v2 import patch_meta as patch_meta
