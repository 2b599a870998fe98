"""A planted fault for check-agent: prompt-needs-auth (see _mini)."""

import _mini

_mini.main("prompt-needs-auth")
