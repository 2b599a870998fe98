"""Analysis of the unions: tagged unions (a class per variant, the union's
common fields merged into each, a fallback class for unknown tags, nested
unions flattened) and structural ones. A part of :class:`Analyzer` (see
``analysis.py``), split off along this seam.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .model import ClassDef, Field, Model, TExpr, UnionDef
from .naming import META_WIRE, pascal, unknown_class_names


class UnionAnalysis:
    """The union half of :class:`~schemagen.analysis.Analyzer`."""

    if TYPE_CHECKING:
        defs: dict[str, dict[str, Any]]
        model: Model
        field_refs: dict[str, int]
        variant_refs: dict[str, list[tuple[str, str]]]
        absorbed: set[str]
        _pending_flatten_branch: set[str]

        @staticmethod
        def _branches(d: dict[str, Any]) -> list[dict[str, Any]] | None: ...
        def _is_union(self, d: dict[str, Any]) -> bool: ...
        def _tag_of(self, b: dict[str, Any]) -> tuple[str, str] | None: ...
        def _payload(self, b: dict[str, Any]) -> str | None: ...
        def _tagged(self, branches: list[dict[str, Any]]) -> bool: ...
        def texpr(self, node: dict[str, Any]) -> tuple[TExpr, bool]: ...
        def _fields(self, owner: str, d: dict[str, Any]) -> list[Field]: ...
        def _add_class(self, c: ClassDef) -> None: ...

    def _union(self, name: str, d: dict[str, Any]) -> None:
        branches = self._branches(d) or []
        self.model.def_kinds[name] = ("union", name)
        if not self._tagged(branches):
            self._structural_union(name, branches)
            return
        common = self._fields(name, {k: v for k, v in d.items() if k != "anyOf"})
        u = UnionDef(name, members=[], def_name=name)
        key = None
        payload_count: dict[str, int] = {}
        for b in branches:
            p = self._payload(b)
            if p and self._tag_of(b):
                payload_count[p] = payload_count.get(p, 0) + 1
        for b in branches:
            tag = self._tag_of(b)
            payload = self._payload(b)
            if b.get("title") == "other" and not tag:
                u.other = True
                continue
            if tag:
                if key not in (None, tag[0]):
                    raise SystemExit(f"{name}: mixed discriminators")
                key = tag[0]
                if payload and not common and self._nested_union(b, tag, payload):
                    u.nested[tag[1]] = payload
                    continue
                cls = self._variant_class(name, b, tag, payload, common, payload_count)
                u.tags[tag[1]] = cls
            else:
                cls = self._fallback_class(name, b, payload, common)
                u.fallback = cls
            u.members.append(cls)
        u.key = key
        u.unknown = self._unknown_name(name)
        self._add_class(ClassDef(u.unknown, [], def_name=name, unknown_of=name))
        u.members.append(u.unknown)
        self.model.unions[name] = u

    def _nested_union(self, b: dict[str, Any], tag: tuple[str, str], payload: str) -> bool:
        """A variant that is only a tag over another tagged union (v2's ``state_update``:
        ``sessionUpdate`` picks ``StateUpdate``, whose ``state`` picks the class)."""
        pd = self.defs.get(payload, {})
        inner = self._branches(pd)
        if not inner or not self._is_union(pd) or not self._tagged(inner):
            return False
        return "properties" not in pd and set(b.get("properties", {})) == {tag[0]}

    def _nest_members(self) -> None:
        """A nesting union's members include its inner unions' members (after its own)."""
        for u in self.model.unions.values():
            for inner in u.nested.values():
                if self.model.unions[inner].nested:
                    raise SystemExit(f"{u.name}: unions nested more than one level")
                extra = [m for m in self.model.unions[inner].members if m not in u.members]
                at = u.members.index(str(u.unknown))
                u.members[at:at] = extra

    def _unknown_name(self, union: str) -> str:
        """``Unknown<Union>``, or ``Other<Union>`` where the schema has a def of that name
        (the unstable ``UnknownStateUpdate`` is the ``state: "unknown"`` variant)."""
        for name in unknown_class_names(union):
            if name not in self.defs and name not in self.model.classes:
                return name
        raise SystemExit(f"{union}: no free name for its unknown-variant class")

    def _variant_class(
        self,
        union: str,
        b: dict[str, Any],
        tag: tuple[str, str],
        payload: str | None,
        common: list[Field],
        payload_count: dict[str, int],
    ) -> str:
        key, value = tag
        inline = {k: v for k, v in b.get("properties", {}).items() if k != key}
        if payload and payload_count[payload] == 1 and not inline:
            shared_elsewhere = (
                self.field_refs.get(payload, 0) > 0 or len(self.variant_refs.get(payload, [])) > 1
            )
            if common and shared_elsewhere:
                raise SystemExit(f"{union}: cannot merge common fields into shared {payload}")
            if payload in self.model.classes:
                c = self.model.classes[payload]
            else:
                pd = self.defs[payload]
                fields = self._merge(common, self._fields(payload, pd))
                c = ClassDef(payload, fields, def_name=payload)
                if common:
                    self.absorbed.add(payload)
                    self.model.def_kinds[payload] = ("merged", union)
                else:
                    self.model.def_kinds[payload] = ("class", payload)
                self._add_class(c)
            c.variant_of.append((union, key, value))
            if not shared_elsewhere:
                c.tag = (key, value)
            return c.name
        name = pascal(value) if payload and not inline else union + pascal(value)
        if payload and payload_count[payload] > 1 and not common:
            base = payload
            if payload not in self.model.classes:
                pd = self.defs[payload]
                self._add_class(ClassDef(payload, self._fields(payload, pd), def_name=payload))
                self.model.def_kinds[payload] = ("class", payload)
            fields = list(self.model.classes[base].fields)
        else:
            base = None
            pf = self._fields(payload, self.defs[payload]) if payload else []
            fields = self._merge(
                common,
                pf,
                self._fields(union, {"properties": inline, "required": b.get("required", [])}),
            )
        if name in self.defs:
            raise SystemExit(f"{union}: variant name {name} collides with a def")
        c = ClassDef(
            name,
            fields,
            def_name=payload or union,
            base=base,
            tag=(key, value),
        )
        c.variant_of.append((union, key, value))
        self._add_class(c)
        return name

    def _fallback_class(
        self, union: str, b: dict[str, Any], payload: str | None, common: list[Field]
    ) -> str:
        if payload and not common and "properties" not in b:
            if payload not in self.model.classes:
                pd = self.defs[payload]
                c = ClassDef(payload, self._fields(payload, pd), def_name=payload)
                self._add_class(c)
                self.model.def_kinds[payload] = ("class", payload)
            return payload
        name = union + pascal(str(b.get("title", "default")))
        fields = self._merge(common, self._fields(union, b))
        self._add_class(ClassDef(name, fields, def_name=union))
        return name

    @staticmethod
    def _merge(*groups: list[Field]) -> list[Field]:
        seen: dict[str, Field] = {}
        for g in groups:
            for f in g:
                seen.setdefault(f.wire or f.attr, f)
        meta = [f for f in seen.values() if f.wire == META_WIRE]
        rest = [f for f in seen.values() if f.wire != META_WIRE and not f.flatten]
        flat = [f for f in seen.values() if f.flatten]
        return rest + flat + meta

    def _structural_union(self, name: str, branches: list[dict[str, Any]]) -> None:
        u = UnionDef(name, members=[], def_name=name)
        for b in branches:
            node = {k: v for k, v in b.items() if k not in ("title", "description")}
            if node == {"type": "null"}:
                u.branches.append(TExpr("null"))
                continue
            t, _ = self.texpr(node)
            if t.kind == "obj" and "properties" in node:  # an inline object: a class of its own
                cls = name + pascal(str(b.get("title", "")))
                if cls in self.defs or cls == name:
                    raise SystemExit(f"{name}: cannot name the inline branch {b.get('title')}")
                self._add_class(ClassDef(cls, self._fields(name, node), def_name=name))
                t = TExpr("class", ref=cls)
            u.branches.append(t)
        self.model.unions[name] = u
