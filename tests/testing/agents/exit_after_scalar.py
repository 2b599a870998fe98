"""A planted fault for check-agent: exit-after-scalar (see _mini)."""

import _mini

_mini.main("exit-after-scalar")
