"""Tracing tests: each side gets its own tracer provider and in-memory exporter."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")
