"""Not a fault: an agent that cannot reach its model (no network) answers
prompts with an error saying so; check-agent calls that INCOMPLETE."""

import _mini

_mini.main("no-model")
