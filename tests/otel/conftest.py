"""Tracing tests: each side gets its own tracer provider and in-memory
exporter. They need the test extra's opentelemetry-sdk (and the otel extra's
API); without them, this folder is not collected."""

from __future__ import annotations

import importlib.util

try:
    _HAVE_SDK = importlib.util.find_spec("opentelemetry.sdk") is not None
except ModuleNotFoundError:  # no opentelemetry at all
    _HAVE_SDK = False

if not _HAVE_SDK:
    collect_ignore_glob = ["test_*.py"]
