"""A planted fault for check-agent: an agent that never cancels its nested requests on the wire."""

import _mini

_mini.main("no-nested-cancel")
