"""The smallest chain proxy written with ``acp_trio.proxy``: a ``Proxy``
that changes nothing, so every message is passed on as it is read. What a
proxy hop costs when the proxy adds no work of its own.

    python -m acp_trio conduct -- python pass_proxy.py -- AGENT_CMD...
"""

from __future__ import annotations

import trio

from acp_trio.proxy import Proxy, run_proxy

if __name__ == "__main__":
    trio.run(run_proxy, Proxy())
