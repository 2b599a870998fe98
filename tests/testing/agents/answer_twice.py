"""A planted fault for check-agent: an agent that answers unknown methods twice."""

import _mini

_mini.main("answer-twice")
