"""A planted fault for check-agent: an agent that cancels the turns of every session on a
``session/cancel`` of one."""

import _mini

_mini.main("cancel-all-sessions")
