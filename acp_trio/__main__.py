"""``python -m acp_trio``: see :mod:`acp_trio._cli`."""

import sys

from acp_trio._cli import main

if __name__ == "__main__":
    sys.exit(main())
