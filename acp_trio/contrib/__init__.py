"""Client-side helpers built on the typed API, for applications.

- :class:`WorkspaceFiles` / :class:`WorkspaceFilesMixin`: an agent's
  ``fs/*`` requests served from a workspace folder, safely (no path leaves
  it, symlinks included).
- :class:`TerminalManager` / :class:`TerminalsMixin` /
  :func:`open_terminal_manager`: an agent's ``terminal/*`` requests served
  by real processes, each killed and reaped on release, cancellation or
  close (an :data:`ApproveFunc` may refuse a command).

- :class:`SessionAccumulator` / :class:`SessionStates`: a session's state
  (messages, tool calls, plan, mode, usage, ...) folded from its
  ``session/update`` notifications.
- :class:`PermissionBroker` / :class:`PermissionBrokerMixin`: a client's
  ``session/request_permission`` answered by an approver (:func:`auto_allow`,
  :func:`auto_reject`, :func:`policy`, :func:`yes_no`, or your own), with
  ``session/cancel`` applied.
"""

from acp_trio._public import fix_module_names as _fix_module_names
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
from acp_trio.contrib._terminals import ApproveFunc as ApproveFunc
from acp_trio.contrib._terminals import TerminalManager as TerminalManager
from acp_trio.contrib._terminals import TerminalsMixin as TerminalsMixin
from acp_trio.contrib._terminals import open_terminal_manager as open_terminal_manager
from acp_trio.contrib._workspace import WorkspaceFiles as WorkspaceFiles
from acp_trio.contrib._workspace import WorkspaceFilesMixin as WorkspaceFilesMixin

_fix_module_names("acp_trio.contrib", globals())
