"""A planted fault for check-agent: an agent that stays silent on a line of invalid JSON."""

import _mini

_mini.main("silent-on-parse-error")
