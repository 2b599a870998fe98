"""Generate every ``_generated_*.py`` module of acp_trio from the ACP JSON
Schema: ``acp_trio/schema/`` (v1, stable and unstable), ``acp_trio/schema/v2/``
and the typed v2 proxies in ``acp_trio/v2/``, and the structural schemas the
package ships (``acp_trio/schema/json/``), with one entry point and one
``--check``.

The schema comes from the ``@agentclientprotocol/sdk`` npm package, at the
version ``tests/interop/package.json`` pins (``source`` says why and how).

Usage (from the repository root)::

    make regen                            # = python tools/gen_schema.py (npm installs the pin)
    make schema-update VERSION=2.5.0      # pin another release, then regenerate
    python tools/gen_schema.py --check    # exit 1 if the committed files are stale
    python tools/gen_schema.py --from-shipped   # no npm: from acp_trio/schema/json

The generator works in three steps, one group of modules each (in tools/schemagen/):

1. *analysis* (``analysis``, building the ``model`` with the ``naming`` rules)
   turns the schema's ``$defs`` into a small model (aliases, classes, unions,
   methods; the method tables come from the definitions' ``x-method`` and
   ``x-side``, see ``source``);
2. *emission* (``emit_types``, ``emit_codec`` with ``codec_values``,
   ``emit_tables``, sharing ``emit_common``) writes four modules per schema
   flavour: types (attrs classes and aliases), codec (specialised fast
   structure/unstructure functions), tables (union, leniency and field tables,
   also walked by the slow validator) and methods (the method table);
3. the output is run through ``ruff format`` (``driver``) so it is
   deterministic and already formatted; ``cli`` writes it or checks it.

The typed proxy methods (``ProxiesEmitter``) are emitted for v1's stable
schema (``acp_trio/schema/_generated_proxies.py``) and for v2's
(``acp_trio/v2/_generated_proxies.py``, the typed API of ``acp_trio.v2``).

An unstable flavour is generated as a delta over the stable one of the same
package (``delta``): a definition that is the same in both, and so is all it
refers to, is imported from the stable modules (class, codec functions, table
rows) instead of being generated again.

No description text from the schema is copied into the output (the
generator reads the structural schema, which has none): a class carries its
name, its wire name and a link to the upstream schema page.
"""
