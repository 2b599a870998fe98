"""A planted fault for check-agent: an agent that answers unknown notifications with an error."""

import _mini

_mini.main("answer-notifications")
