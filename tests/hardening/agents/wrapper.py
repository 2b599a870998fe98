"""A uvx-style wrapper in Python: runs the agent (``sys.argv[1:]``) as a
child sharing our stdio, waits for it, exits with its status."""

import subprocess
import sys

sys.exit(subprocess.call(sys.argv[1:]))
