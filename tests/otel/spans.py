"""Helpers for reading finished spans."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from acp_trio.contrib.otel import Tracing


def recording() -> tuple[Tracing, InMemorySpanExporter]:
    """A :class:`Tracing` whose spans end up in the returned exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider), exporter


def only(spans: Iterable[ReadableSpan], name: str, kind: SpanKind) -> ReadableSpan:
    found = [s for s in spans if s.name == name and s.kind == kind]
    assert len(found) == 1, (name, kind, [(s.name, s.kind) for s in spans])
    return found[0]


def events(span: ReadableSpan) -> list[str]:
    return [event.name for event in span.events]


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def trace_ids(*groups: Sequence[ReadableSpan]) -> set[int]:
    return {s.context.trace_id for group in groups for s in group}


def load_render_trace() -> ModuleType:
    """``tools/render_trace.py``, loaded by path (``tools/`` is no package)."""
    path = Path(__file__).resolve().parents[2] / "tools" / "render_trace.py"
    spec = importlib.util.spec_from_file_location("render_trace", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["render_trace"] = module
    spec.loader.exec_module(module)
    return module
