"""The mini agent without a fault: it must pass every check."""

import _mini

_mini.main("")
