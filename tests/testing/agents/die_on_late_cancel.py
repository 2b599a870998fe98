"""A planted fault for check-agent: an agent that
dies on a `$/cancel_request` of a finished request."""

import _mini

_mini.main("die-on-late-cancel")
