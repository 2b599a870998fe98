"""Spans exported by other processes started with ``--otel`` and
``OTEL_TRACES_EXPORTER=console`` (one JSON object per line on stderr), read
through a logger given as their ``stderr``."""

from __future__ import annotations

import json
import logging
import os
from typing import Any


class Lines(logging.Handler):
    """A logger's records, as the lines of the process's stderr."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.logger = logging.getLogger(name)
        self.logger.propagate = False
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def close(self) -> None:
        self.logger.removeHandler(self)
        super().close()

    def spans(self) -> list[dict[str, Any]]:
        """Every span in the lines (a forwarding process's prefix skipped)."""
        found = []
        for line in self.lines:
            start = line.find('{"name": ')
            if start >= 0:
                found.append(json.loads(line[start:]))
        return found


def console_env() -> dict[str, str]:
    """Our environment, with spans exported to stderr and no other OTEL_*."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    return {**env, "OTEL_TRACES_EXPORTER": "console"}


def hex_id(value: int, width: int) -> str:
    """A span or trace id as the console exporter writes it."""
    return f"0x{value:0{width}x}"
