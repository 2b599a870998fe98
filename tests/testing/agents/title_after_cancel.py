"""A planted fault for check-agent: title-after-cancel (see _mini)."""

import _mini

_mini.main("title-after-cancel")
