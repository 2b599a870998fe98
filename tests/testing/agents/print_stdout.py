"""A planted fault for check-agent: an agent that prints a line of text to stdout."""

import _mini

_mini.main("print-stdout")
