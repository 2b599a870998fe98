"""A planted fault for check-agent: an agent that needs authentication: it refuses `session/new`."""

import _mini

_mini.main("needs-auth")
