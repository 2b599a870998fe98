"""A planted fault for check-agent: an agent that asks permission on every prompt."""

import _mini

_mini.main("ask-permission")
