"""A clear error when the ``remote`` extra is not installed."""

from __future__ import annotations

import importlib.util

__all__ = ["check"]


def check() -> None:
    """Raise ``ImportError`` naming the extra if a library it installs is missing."""
    missing = [
        name
        for name in ("hypercorn", "wsproto", "httpx2")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise ImportError(
            f"acp_trio.remote needs the 'remote' extra (missing: {', '.join(missing)}): "
            "pip install '<acp_trio checkout or wheel>[remote]'"
        )


check()
