"""A planted fault for check-agent: slow-echo (see _mini)."""

import _mini

_mini.main("slow-echo")
