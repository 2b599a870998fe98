"""A planted fault for check-agent: an agent that ignores ``$/cancel_request``."""

import _mini

_mini.main("ignore-cancel-request")
