"""The OpenTelemetry SDK set up from the standard ``OTEL_*`` variables (the
command-line tools' ``--otel``), and the OTLP settings passed on to a spawned
agent.

Only what acp_trio's tools need of the SDK's configuration: a tracer
provider with the resource the SDK detects (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``) and the exporters ``OTEL_TRACES_EXPORTER``
names (default ``otlp``; ``console``; ``none``; any exporter installed under
the SDK's ``opentelemetry_traces_exporter`` entry points). ``console`` writes
one JSON line per span to stderr, never stdout: an agent's stdout carries
only the protocol.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING

from acp_trio._otel._tracing import Tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["configure_sdk", "otlp_environment", "start_tracing"]

_TRUE = ("true", "1", "yes")


def configure_sdk(
    default_service_name: str = "acp_trio",
    *,
    environ: Mapping[str, str] | None = None,
    console: IO[str] | None = None,
    strict: bool = True,
) -> Callable[[], None]:
    """Install a global tracer provider configured from ``OTEL_*`` (in
    ``environ``, by default ``os.environ``) and return the function that
    flushes and shuts it down (call it before exiting). ``OTEL_SDK_DISABLED``
    true: nothing is installed. The ``console`` exporter writes to
    ``console`` (stderr by default).

    Raises ``ImportError`` without ``opentelemetry-sdk``, and ``ValueError``
    for an exporter that is not installed; with ``strict=False`` such an
    exporter is named on stderr and left out instead (the command line's
    ``--otel``: an agent must not fail to start for its telemetry).
    """
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return lambda: None
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: default_service_name}))
    provider = TracerProvider(resource=resource)
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    for name in names:
        if name == "none":
            continue
        if name == "console":
            out = sys.stderr if console is None else console
            exporter = ConsoleSpanExporter(
                out=out, formatter=lambda span: span.to_json(indent=None) + "\n"
            )
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            continue
        try:
            exporter_class = _entry_point_exporter(name)
        except ValueError as exc:
            if strict:
                raise
            print(f"acp_trio: {exc}; its spans are not exported", file=sys.stderr)
            continue
        provider.add_span_processor(BatchSpanProcessor(exporter_class()))
    trace.set_tracer_provider(provider)
    return provider.shutdown


def _entry_point_exporter(name: str) -> Callable[[], SpanExporter]:
    from importlib.metadata import entry_points

    for entry in entry_points(group="opentelemetry_traces_exporter", name=name):
        loaded: Callable[[], SpanExporter] = entry.load()
        return loaded
    hint = " (pip install opentelemetry-exporter-otlp)" if name.startswith("otlp") else ""
    raise ValueError(f"OTEL_TRACES_EXPORTER names {name!r}, which is not installed{hint}")


def start_tracing(default_service_name: str, root: str | None = None) -> Callable[[], None]:
    """:func:`configure_sdk` (not strict), then trace every connection of the process
    (:meth:`Tracing.install`), under a span named ``root`` if given (current
    until the returned function, which stops and flushes, is called: a
    ``trio.run`` started meanwhile inherits it)."""
    from opentelemetry import context, trace

    shutdown = configure_sdk(default_service_name, strict=False)
    tracing = Tracing()
    tracing.install()
    span = None if root is None else tracing.tracer.start_span(root)
    token = None if span is None else context.attach(trace.set_span_in_context(span))

    def stop() -> None:
        if span is not None and token is not None:
            context.detach(token)
            span.end()
        tracing.uninstall()
        shutdown()

    return stop


def otlp_environment(
    endpoint: str | None = None,
    *,
    protocol: str | None = None,
    headers: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The ``OTEL_*`` settings that make a spawned agent export its traces
    where we do: ``OTEL_TRACES_EXPORTER=otlp`` and the OTLP endpoint,
    protocol and headers, each given here or else taken from ``environ``
    (by default ``os.environ``); W3C propagation (``OTEL_PROPAGATORS``) as
    ours. For ``open_spawned_agent(telemetry=...)``, which adds them to the
    agent's environment without overriding any ``OTEL_*`` already there."""
    env = os.environ if environ is None else environ
    out = {"OTEL_TRACES_EXPORTER": "otlp"}
    given = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_HEADERS": headers,
    }
    for key, value in given.items():
        if value is not None:
            out[key] = value
    for key, value in env.items():
        if key.startswith("OTEL_EXPORTER_OTLP_") or key == "OTEL_PROPAGATORS":
            out.setdefault(key, value)
    return out
