"""A planted fault for check-agent: an agent that dies on a batch array."""

import _mini

_mini.main("die-on-batch")
