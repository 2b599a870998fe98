"""Sphinx configuration of acp_trio's documentation (``make docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import acp_trio  # noqa: E402

project = "acp_trio"
author = "acp_trio developers"
copyright = "acp_trio developers"
release = acp_trio.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "myst_parser",
    "acp_trio_docs",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "benchmarks/*.json"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3


# The API reference: signatures as written (public names, thanks to
# acp_trio's own __module__ fixing), members in source order.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autodoc_default_options = {"show-inheritance": True}
add_module_names = False
python_use_unqualified_type_names = True

# Every reference into acp_trio must resolve (-n). Other projects have no
# inventory here (the build runs offline), so their names stay plain text.
nitpicky = True
nitpick_ignore_regex = [
    (
        r"py:.*",
        r"(trio|collections|contextlib|typing|typing_extensions|types|enum|logging|ssl"
        r"|os|io|pathlib|subprocess|json|datetime|socket|signal|asyncio|attr|attrs|cattrs"
        r"|cattr|httpx2|httpcore2|hypercorn|wsproto|opentelemetry|_pytest|pytest"
        r"|builtins|abc|functools|re|outcome)(\..*)?",
    ),
]

# Names that public signatures mention but that have no page of their own:
# private helper types (documented where they matter, on the public class),
# type variables and aliases that only type checkers see, and a type of the
# OpenTelemetry SDK.
nitpick_ignore_regex += [
    ("py:class", name)
    for name in [
        r"(acp_trio\.[\w.]*\.)?_?(OversizedFrame|RequestOwner|OutgoingRequest|IncomingRequest)",
        r"(acp_trio\.[\w.]*\.)?_?(Request|Status|KeyedStates|Folding|ConnectionTracing)",
        r"TraceHook|MessageKind|TracerProvider|[A-Z]",
        r"V1AgentProxy|V1InitializeResponse|client_v2\.AgentProxy|schema_v2\.InitializeResponse",
    ]
]
nitpick_ignore_regex += [("py:data", "DEFAULT_SCHEMA")]  # a private constant, by name

html_theme = "furo"
html_title = f"acp_trio {release}"
html_static_path: list[str] = []
