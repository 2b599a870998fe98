"""A planted fault: an agent that exits at once, saying why on stderr."""

import sys

print("exit_at_once: no API key configured", file=sys.stderr)
sys.exit(3)
