"""Client-side helpers built on the typed API, for applications.

- :class:`SessionAccumulator` / :class:`SessionStates`: a session's state
  (messages, tool calls, plan, mode, usage, ...) folded from its
  ``session/update`` notifications.
- :class:`PermissionBroker` / :class:`PermissionBrokerMixin`: a client's
  ``session/request_permission`` answered by an approver (:func:`auto_allow`,
  :func:`auto_reject`, :func:`policy`, :func:`yes_no`, or your own), with
  ``session/cancel`` applied.
"""

from acp_trio.contrib._permissions import Approver as Approver
from acp_trio.contrib._permissions import PendingPermission as PendingPermission
from acp_trio.contrib._permissions import PermissionBroker as PermissionBroker
from acp_trio.contrib._permissions import PermissionBrokerMixin as PermissionBrokerMixin
from acp_trio.contrib._permissions import auto_allow as auto_allow
from acp_trio.contrib._permissions import auto_reject as auto_reject
from acp_trio.contrib._permissions import policy as policy
from acp_trio.contrib._permissions import yes_no as yes_no
from acp_trio.contrib._session_state import Compaction as Compaction
from acp_trio.contrib._session_state import Message as Message
from acp_trio.contrib._session_state import SessionAccumulator as SessionAccumulator
from acp_trio.contrib._session_state import SessionStates as SessionStates
from acp_trio.contrib._session_state import ToolCallState as ToolCallState
