"""A planted fault for check-agent: an agent that
answers malformed input with an error without an id."""

import _mini

_mini.main("idless-replies")
