"""A planted fault: an agent that answers every line with JSON nested far
deeper than any decoder's recursion limit."""

import sys

for _line in sys.stdin.buffer:
    sys.stdout.buffer.write(b"[" * 200_000 + b"]" * 200_000 + b"\n")
    sys.stdout.buffer.flush()
