"""Unstable ACP v1 additions, opt-in: the full type set of ``schema.unstable.json``.

Upstream marks these "UNSTABLE: may change or disappear" (providers, auth
status, session fork/archive/status/title, system prompts, subagents, proxy
chains, MCP-over-ACP, plan updates, usage...). A definition the unstable schema
changes is a class of its own here: ``acp_trio.schema.unstable.NewSessionRequest`` is
not ``acp_trio.schema.NewSessionRequest`` (it has the extra ``system_prompt``
field). A definition that is the same in both, and so is all it refers to, is the
stable class itself, imported (``unstable.ContentBlock`` is ``schema.ContentBlock``;
the generator lists them in ``_generated_unstable_types._REUSED_NAMES``). Pick one
module per connection and use its own :data:`converter`, which knows both kinds.
The converter policy is the stable one (see :mod:`acp_trio.schema._converter`).
"""

from acp_trio.schema import _generated_unstable_codec as _codec
from acp_trio.schema import _generated_unstable_tables as _tables
from acp_trio.schema import _generated_unstable_types as _types
from acp_trio.schema._converter import SchemaConverter, schema_set
from acp_trio.schema._errors import SchemaValidationError as SchemaValidationError
from acp_trio.schema._generated_unstable_methods import METHODS as METHODS
from acp_trio.schema._generated_unstable_methods import NOTIFICATIONS as NOTIFICATIONS
from acp_trio.schema._generated_unstable_methods import PROTOCOL_VERSION as PROTOCOL_VERSION
from acp_trio.schema._generated_unstable_methods import REQUESTS as REQUESTS
from acp_trio.schema._generated_unstable_methods import SCHEMA_VERSION as SCHEMA_VERSION
from acp_trio.schema._generated_unstable_types import *  # noqa: F403
from acp_trio.schema._runtime import UNSET as UNSET
from acp_trio.schema._runtime import MethodInfo as MethodInfo
from acp_trio.schema._runtime import UnsetType as UnsetType

UNSTABLE, configure_converter, make_converter = schema_set(
    _types, _codec, _tables, "unstable ACP", __name__
)

#: The ready converter for unstable ACP types.
converter: SchemaConverter = make_converter()

__all__ = [
    "METHODS",
    "NOTIFICATIONS",
    "PROTOCOL_VERSION",
    "REQUESTS",
    "SCHEMA_VERSION",
    "UNSET",
    "MethodInfo",
    "SchemaValidationError",
    "UnsetType",
    "configure_converter",
    "converter",
    "make_converter",
]
__all__ += _types.__all__
