"""The one error the schema package raises for malformed input."""

from __future__ import annotations

__all__ = ["SchemaValidationError"]


class SchemaValidationError(ValueError):
    """Data did not match an ACP schema type.

    ``errors`` lists every problem found, each as ``<path>: <reason>`` with a
    JSON path from the structured value (``$``), for example
    ``$.update.content.text: expected a string, got integer``. The text is
    meant for people and is safe to send back to the peer as the ``data`` of
    a ``-32602 Invalid params`` error: it names types and paths, never values
    beyond short enum tags.
    """

    def __init__(self, type_name: str, errors: list[str]) -> None:
        self.type_name = type_name
        self.errors = errors
        super().__init__(f"invalid {type_name}: " + "; ".join(errors))
