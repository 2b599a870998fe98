"""ACP v1 schema types (stable), their cattrs converter and the method table.

Every schema definition is here under its schema name: attrs classes
(frozen, slotted, keyword-only) for objects, ``Literal`` aliases for string
enums, type aliases for ids and for unions (a union alias lists its member
classes and its ``Unknown...`` class). Convert with :data:`converter`::

    from acp_trio.schema import SessionNotification, converter

    note = converter.structure(params, SessionNotification)
    params = converter.unstructure(note)

The converter's policy (unknown keys and variants survive, leniency only
where the schema asks, no coercion, exact round trips) is described in
``acp_trio/schema/_converter.py``. Unknown keys live in each object's
``extra_``; :data:`UNSET` marks "absent" where ``null`` has its own meaning
(``SessionInfoUpdate.title``). :data:`METHODS` (and :data:`REQUESTS`,
:data:`NOTIFICATIONS`) map wire method names to :class:`MethodInfo`.

``PROTOCOL_VERSION`` is the protocol version these types are for, and
``SCHEMA_VERSION`` names the schema release they were generated from.

Unstable protocol additions live in the opt-in module
:mod:`acp_trio.schema.unstable`.
"""

from acp_trio.schema._converter import SchemaConverter as SchemaConverter
from acp_trio.schema._converter import configure_converter as configure_converter
from acp_trio.schema._converter import make_converter as make_converter
from acp_trio.schema._errors import SchemaValidationError as SchemaValidationError
from acp_trio.schema._generated_methods import METHODS as METHODS
from acp_trio.schema._generated_methods import NOTIFICATIONS as NOTIFICATIONS
from acp_trio.schema._generated_methods import PROTOCOL_VERSION as PROTOCOL_VERSION
from acp_trio.schema._generated_methods import REQUESTS as REQUESTS
from acp_trio.schema._generated_methods import SCHEMA_VERSION as SCHEMA_VERSION
from acp_trio.schema._generated_types import *  # noqa: F403
from acp_trio.schema._generated_types import __all__ as _types_all
from acp_trio.schema._runtime import UNSET as UNSET
from acp_trio.schema._runtime import MethodInfo as MethodInfo
from acp_trio.schema._runtime import UnsetType as UnsetType

#: The ready converter for stable ACP types (see :func:`make_converter`).
converter: SchemaConverter = make_converter()

__all__ = [
    "METHODS",
    "NOTIFICATIONS",
    "PROTOCOL_VERSION",
    "REQUESTS",
    "SCHEMA_VERSION",
    "UNSET",
    "MethodInfo",
    "SchemaConverter",
    "SchemaValidationError",
    "UnsetType",
    "configure_converter",
    "converter",
    "make_converter",
]
__all__ += _types_all
