"""A planted fault: an agent that never answers (and never reads)."""

import time

time.sleep(3600)
