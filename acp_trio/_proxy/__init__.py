"""Proxy chains: the proxy side (:mod:`._proxy`), the conductor that runs a
chain (:mod:`._conductor`), the order notifications are passed on in
(:mod:`._forward_order`) and the logging relay (:mod:`._trace`). The public
face is :mod:`acp_trio.proxy`."""
