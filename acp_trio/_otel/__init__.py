"""OpenTelemetry tracing (the ``otel`` extra): spans for requests, W3C trace
context in ``_meta``, and the SDK set-up of the command-line tools. Imported
only when asked for; public names in :mod:`acp_trio.contrib.otel`."""
