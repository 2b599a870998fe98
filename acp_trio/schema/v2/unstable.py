"""Unstable ACP v2 additions, opt-in: the full type set of v2's ``schema.unstable.json``.

Never v1's classes. A definition the unstable v2 schema changes is a class of its own
here (``NewSessionRequest``); one that is the same as in :mod:`acp_trio.schema.v2`,
and so is all it refers to, is that class itself, imported (``PromptResponse``).
Pick one module per connection and use its own :data:`converter`, which knows both
kinds. Upstream marks these "UNSTABLE: may change or disappear", on top of v2 being
a preview.
"""

from acp_trio.schema._converter import SchemaConverter, schema_set
from acp_trio.schema._errors import SchemaValidationError as SchemaValidationError
from acp_trio.schema._runtime import UNSET as UNSET
from acp_trio.schema._runtime import MethodInfo as MethodInfo
from acp_trio.schema._runtime import UnsetType as UnsetType
from acp_trio.schema.v2 import _generated_unstable_codec as _codec
from acp_trio.schema.v2 import _generated_unstable_tables as _tables
from acp_trio.schema.v2 import _generated_unstable_types as _types
from acp_trio.schema.v2._generated_unstable_methods import METHODS as METHODS
from acp_trio.schema.v2._generated_unstable_methods import NOTIFICATIONS as NOTIFICATIONS
from acp_trio.schema.v2._generated_unstable_methods import PROTOCOL_VERSION as PROTOCOL_VERSION
from acp_trio.schema.v2._generated_unstable_methods import REQUESTS as REQUESTS
from acp_trio.schema.v2._generated_unstable_methods import SCHEMA_VERSION as SCHEMA_VERSION
from acp_trio.schema.v2._generated_unstable_types import *  # noqa: F403

V2_UNSTABLE, configure_converter, make_converter = schema_set(
    _types, _codec, _tables, "unstable ACP v2", __name__
)

#: The ready converter for unstable ACP v2 types.
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
