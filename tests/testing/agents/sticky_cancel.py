"""A planted fault for check-agent: an agent that keeps a ``session/cancel`` of an idle session
and ends the session's next turn with it."""

import _mini

_mini.main("sticky-cancel")
