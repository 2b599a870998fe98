"""ACP v2 (Preview) schema types, their converter and the method table.

Generated from the v2 schema the same way as the v1 types, and fully separate
from them: ``acp_trio.schema.v2.PromptResponse`` is not
``acp_trio.schema.PromptResponse`` (v2 requires ``message_id``), so convert v2
messages with this module's own :data:`converter`. The converter policy is the
v1 one (unknown keys and variants survive, leniency only where the schema asks,
exact round trips; see ``acp_trio/schema/_converter.py``).

Upstream calls v2 a preview: its types can still change between releases.
``sessionUpdate: "state_update"`` carries a second tag (``state``), so a
:data:`SessionUpdate` can be a :class:`RunningStateUpdate`,
:class:`IdleStateUpdate`, :class:`RequiresActionStateUpdate` or an unknown
state; the converter adds ``sessionUpdate`` when it writes one as a
:data:`SessionUpdate`.

``PROTOCOL_VERSION`` (2) and ``SCHEMA_VERSION`` say which protocol version
and schema release these types are for; ``UNSET`` is v1's sentinel for an
absent key, used by v2's patch fields too.

Unstable v2 additions live in the opt-in module :mod:`acp_trio.schema.v2.unstable`.
"""

from acp_trio.schema._converter import SchemaConverter, schema_set
from acp_trio.schema._errors import SchemaValidationError as SchemaValidationError
from acp_trio.schema._runtime import UNSET as UNSET
from acp_trio.schema._runtime import MethodInfo as MethodInfo
from acp_trio.schema._runtime import UnsetType as UnsetType
from acp_trio.schema.v2 import _generated_codec as _codec
from acp_trio.schema.v2 import _generated_tables as _tables
from acp_trio.schema.v2 import _generated_types as _types
from acp_trio.schema.v2._generated_methods import METHODS as METHODS
from acp_trio.schema.v2._generated_methods import NOTIFICATIONS as NOTIFICATIONS
from acp_trio.schema.v2._generated_methods import PROTOCOL_VERSION as PROTOCOL_VERSION
from acp_trio.schema.v2._generated_methods import REQUESTS as REQUESTS
from acp_trio.schema.v2._generated_methods import SCHEMA_VERSION as SCHEMA_VERSION
from acp_trio.schema.v2._generated_types import *  # noqa: F403

V2, configure_converter, make_converter = schema_set(_types, _codec, _tables, "ACP v2", __name__)

#: The ready converter for ACP v2 types.
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
