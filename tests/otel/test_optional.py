"""Tracing is optional: nothing imports opentelemetry unless asked, and the
public module only re-exports."""

from __future__ import annotations

import subprocess
import sys

import acp_trio.contrib.otel
from tests.test_public_api import public_names
from tests.test_public_api import test_public_modules_only_re_export as check_re_exports


def test_nothing_imports_opentelemetry_unless_asked() -> None:
    code = (
        "import sys, acp_trio, acp_trio.lowlevel, acp_trio.contrib, acp_trio.testing, "
        "acp_trio.proxy, acp_trio._cli, acp_trio._proxy._conductor\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_contrib_otel_only_re_exports() -> None:
    check_re_exports(acp_trio.contrib.otel)
    assert public_names(acp_trio.contrib.otel) == {"Tracing", "configure_sdk", "otlp_environment"}
