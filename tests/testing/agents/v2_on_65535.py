"""A planted fault for check-agent: v2-on-65535 (see _mini)."""

import _mini

_mini.main("v2-on-65535")
