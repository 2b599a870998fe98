"""A planted fault for check-agent: an agent that answers ``end_turn`` to a
turn cancelled with ``session/cancel``."""

import _mini

_mini.main("end-turn-after-cancel")
