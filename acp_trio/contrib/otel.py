"""OpenTelemetry tracing for ACP connections (the ``otel`` extra).

:class:`Tracing`: pass ``ConnectionConfig(instrument=Tracing())`` to any
``open_*`` / ``serve_*`` / ``run_*`` function. Every request sent and handled
becomes a span (client and server kinds, named by method, with the JSON-RPC
semantic conventions); cancels are events, a cancelled request is marked
``acp.cancelled`` (not an error); the trace context travels in ``_meta``
(``traceparent``, ``tracestate``, ``baggage``) both ways.
:func:`configure_sdk`: the OpenTelemetry SDK set up from the standard
``OTEL_*`` variables, as the command-line tools' ``--otel`` does.
:func:`otlp_environment`: the ``OTEL_*`` settings to pass on to a spawned
agent (``open_spawned_agent(telemetry=...)``).

Importing this module imports ``opentelemetry``; nothing else in acp_trio does.
This module only re-exports.
"""

from acp_trio._otel._sdk import configure_sdk as configure_sdk
from acp_trio._otel._sdk import otlp_environment as otlp_environment
from acp_trio._otel._tracing import Tracing as Tracing
from acp_trio._public import fix_module_names as _fix_module_names

_fix_module_names("acp_trio.contrib.otel", globals())
