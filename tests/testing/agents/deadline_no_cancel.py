"""A planted fault for check-agent: an agent that
lets its deadline pass without cancelling its nested read."""

import _mini

_mini.main("deadline-no-cancel")
