"""A planted fault for check-agent: v2-only (see _mini)."""

import _mini

_mini.main("v2-only")
