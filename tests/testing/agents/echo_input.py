"""A planted fault: an "agent" that copies its stdin to its stdout."""

import sys

for line in sys.stdin.buffer:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
