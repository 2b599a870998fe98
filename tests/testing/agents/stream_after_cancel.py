"""A planted fault for check-agent: stream-after-cancel (see _mini)."""

import _mini

_mini.main("stream-after-cancel")
