"""The unstable modules are a delta over the stable ones (v1 and v2).

A definition that is the same in both schemas, and so is all it refers to, is
the stable class itself in the unstable module, with the stable codec functions
and table rows; the unstable converter still registers a hook for every type
of its module. The analysis that decides it is checked on small models.
"""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any

import pytest

import acp_trio.schema as v1
import acp_trio.schema.unstable as v1_unstable
import acp_trio.schema.v2 as v2
import acp_trio.schema.v2.unstable as v2_unstable
from acp_trio.schema import SchemaValidationError
from acp_trio.schema import _generated_codec as v1_codec
from acp_trio.schema import _generated_tables as v1_tables
from acp_trio.schema import _generated_types as v1_types
from acp_trio.schema import _generated_unstable_codec as v1u_codec
from acp_trio.schema import _generated_unstable_tables as v1u_tables
from acp_trio.schema import _generated_unstable_types as v1u_types
from acp_trio.schema.v2 import _generated_codec as v2_codec
from acp_trio.schema.v2 import _generated_tables as v2_tables
from acp_trio.schema.v2 import _generated_types as v2_types
from acp_trio.schema.v2 import _generated_unstable_codec as v2u_codec
from acp_trio.schema.v2 import _generated_unstable_tables as v2u_tables
from acp_trio.schema.v2 import _generated_unstable_types as v2u_types

from ._schema_data import generator

# (stable types, codec, tables), (unstable types, codec, tables), public modules
PAIRS = {
    "v1": ((v1_types, v1_codec, v1_tables), (v1u_types, v1u_codec, v1u_tables), v1, v1_unstable),
    "v2": ((v2_types, v2_codec, v2_tables), (v2u_types, v2u_codec, v2u_tables), v2, v2_unstable),
}
Mods = tuple[types.ModuleType, types.ModuleType, types.ModuleType]


def pair(name: str) -> tuple[Mods, Mods, types.ModuleType, types.ModuleType]:
    return PAIRS[name]


@pytest.mark.parametrize("name", PAIRS)
def test_most_definitions_are_reused_and_are_the_stable_objects(name: str) -> None:
    (st, _, _), (ut, _, _), stable, unstable = pair(name)
    reused = ut._REUSED_NAMES
    assert len(reused) > len(st.__all__) * 3 // 4  # 174/193 (v1) and 198/223 (v2) today
    assert reused <= set(st.__all__)
    assert reused <= set(ut.__all__)
    for n in reused:
        assert getattr(unstable, n) is getattr(stable, n), n
    assert frozenset(getattr(st, n) for n in reused) == ut._REUSED
    # what differs is generated again: another class under the same name
    differ = (set(st.__all__) & set(ut.__all__)) - reused
    assert "NewSessionRequest" in differ
    for n in differ:
        if isinstance(getattr(st, n), type):
            assert getattr(unstable, n) is not getattr(stable, n), n


@pytest.mark.parametrize("name", PAIRS)
def test_unstable_registries_cover_every_type_with_the_stable_functions(name: str) -> None:
    (st, sc, stab), (ut, uc, utab), _, _ = pair(name)
    # one target per public type, as in the stable module
    assert set(uc.STRUCTURE) == set(utab.TARGETS)
    mods = {st.__name__, ut.__name__}
    classes = {
        c for n in ut.__all__ if isinstance(c := getattr(ut, n), type) and c.__module__ in mods
    }
    assert set(uc.UNSTRUCTURE) == classes
    for key, fn in uc.STRUCTURE.items():
        if key in ut._REUSED:
            assert fn is sc.STRUCTURE[key]
    for key, fn in uc.UNSTRUCTURE.items():
        if key in ut._REUSED:
            assert fn is sc.UNSTRUCTURE[key]
        else:
            assert fn.__module__ == uc.__name__
    for key, spec in utab.CLASSES.items():
        if key in ut._REUSED:
            assert spec is stab.CLASSES[key]
    for union in ut._REUSED_NAMES & set(stab.UNIONS):
        assert utab.UNIONS[union] is stab.UNIONS[union]


def test_v1_unstable_round_trips_own_classes_around_reused_ones() -> None:
    conv = v1_unstable.converter
    note = {
        "sessionId": "s1",
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "hi", "future": 1},
        },
    }
    obj = conv.structure(note, v1_unstable.SessionNotification)
    assert type(obj) is v1_unstable.SessionNotification
    assert type(obj) is not v1.SessionNotification  # the unstable one differs
    assert type(obj.update.content) is v1.TextContent  # reused: the stable class
    assert conv.unstructure(obj) == note
    # the stable converter and the unstable one agree on a reused class
    block = {"type": "text", "text": "hi"}
    assert conv.structure(block, v1_unstable.ContentBlock) == v1.converter.structure(
        block, v1.ContentBlock
    )
    assert conv.unstructure(v1.TextContent(text="x")) == {"type": "text", "text": "x"}


@pytest.mark.parametrize("name", PAIRS)
def test_unstable_converter_explains_errors_in_reused_parts(name: str) -> None:
    *_, unstable = pair(name)
    bad: dict[str, Any] = {"type": "text", "text": 5}
    with pytest.raises(SchemaValidationError) as err:
        unstable.converter.structure(bad, unstable.ContentBlock)
    assert any("text" in e for e in err.value.errors)


@pytest.mark.parametrize("name", PAIRS)
def test_reused_definitions_are_not_generated_again(name: str) -> None:
    _, (ut, uc, utab), _, _ = pair(name)
    types_src = Path(str(ut.__file__)).read_text(encoding="utf-8")
    codec_src = Path(str(uc.__file__)).read_text(encoding="utf-8")
    tables_src = Path(str(utab.__file__)).read_text(encoding="utf-8")
    for n in ut._REUSED_NAMES:
        assert f"\nclass {n}(" not in types_src, n
        assert f"\nclass {n}:" not in types_src, n
        assert f"\n{n}: TypeAlias" not in types_src, n
        assert f"\ndef _s_{n}(" not in codec_src, n
        assert f"    {n}: ClassSpec(" not in tables_src, n
    own_classes = [n for n in ut.__all__ if n not in ut._REUSED_NAMES]
    assert any(f"\nclass {n}:" in types_src for n in own_classes)


# -- the analysis on small models ------------------------------------------------------------


def delta_module() -> Any:
    generator()  # puts tools/ on sys.path
    import schemagen.delta  # type: ignore[import-not-found]

    return schemagen.delta


def model(leaf_kind: str, extra_field: bool = False) -> Any:
    from schemagen.model import ClassDef, Field, Model, TExpr  # type: ignore[import-not-found]

    m = Model()
    leaf = [Field("x", "x", TExpr(leaf_kind), required=True)]
    if extra_field:
        leaf.append(Field("y", "y", TExpr("str")))
    m.classes["Leaf"] = ClassDef("Leaf", leaf, "Leaf")
    m.classes["Mid"] = ClassDef("Mid", [Field("leaf", "leaf", TExpr("class", ref="Leaf"))], "Mid")
    m.classes["Top"] = ClassDef(
        "Top", [Field("items", "items", TExpr("list", item=TExpr("class", ref="Mid")))], "Top"
    )
    m.classes["Other"] = ClassDef("Other", [Field("n", "n", TExpr("int"))], "Other")
    return m


def test_reuse_is_transitive() -> None:
    delta = delta_module()
    same = delta.reused_definitions(model("str"), model("str"))
    assert same == {"Leaf", "Mid", "Top", "Other"}
    # Leaf differs itself; Mid and Top only through what they use
    changed = delta.reused_definitions(model("str"), model("str", extra_field=True))
    assert changed == {"Other"}
    assert delta.reused_definitions(model("str"), model("int")) == {"Other"}


def test_docs_alone_do_not_prevent_reuse() -> None:
    delta = delta_module()
    stable, unstable = model("str"), model("str")
    unstable.classes["Leaf"].variant_of.append(("NewUnion", "type", "leaf"))
    assert "Leaf" in delta.reused_definitions(stable, unstable)


def test_codec_imports_only_what_the_own_code_calls() -> None:
    delta = delta_module()
    base = delta.Base(model("str"), "pkg", frozenset({"_s_Leaf", "_u_Leaf", "_T_U"}))
    d = delta.Delta(base, frozenset({"Leaf"}))
    own = "def _s_Mid(d):\n    return _s_Leaf(d['leaf']), _T_U\n\n_u_Mid = _u_Leaf\n"
    assert delta.codec_imports(own, d) == ["_T_U", "_s_Leaf", "_u_Leaf"]
    with pytest.raises(SystemExit, match="_s_Gone"):
        delta.codec_imports(own + "x = _s_Gone\n", d)


@pytest.mark.parametrize("module", [v1_unstable, v2, v2_unstable], ids=lambda m: m.__name__)
def test_the_modules_share_one_converter_set_up(module: types.ModuleType) -> None:
    for fn in (module.configure_converter, module.make_converter):
        assert fn.__module__ == module.__name__
        assert fn.__doc__
    made = module.make_converter()
    assert made is not module.converter
    assert isinstance(made, v1.SchemaConverter)
    plain = v1.SchemaConverter()
    module.configure_converter(converter=plain)
    data = {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}
    for conv in (made, plain):
        obj = conv.structure(data, module.PromptRequest)
        assert type(obj) is module.PromptRequest
        assert conv.unstructure(obj) == data
        with pytest.raises(SchemaValidationError):
            conv.structure({"sessionId": 1, "prompt": []}, module.PromptRequest)


@pytest.mark.parametrize("folder", ["v1", "v2"])
def test_reused_definitions_generate_the_same_code_from_either_schema(folder: str) -> None:
    """What the delta skips is what a full unstable generation would have written:
    per reused class and union, the codec code built from the unstable model is the
    stable model's (helper numbers aside), and so are the class bodies."""
    from ._schema_data import load, load_meta

    delta = delta_module()
    from schemagen.analysis import analyze  # type: ignore[import-not-found]
    from schemagen.emit_codec import CodecEmitter  # type: ignore[import-not-found]
    from schemagen.emit_types import TypesEmitter  # type: ignore[import-not-found]

    def load_model(flavour: str) -> Any:
        return analyze(load(flavour), load_meta(flavour))

    stable = load_model("stable" if folder == "v1" else "v2")
    unstable = load_model("unstable" if folder == "v1" else "v2-unstable")
    reused = delta.reused_definitions(stable, unstable)
    assert len(reused) > 150
    numbered = re.compile(r"\b_([cL])\d+\b")

    def norm(lines: list[str]) -> list[str]:
        return [numbered.sub(r"_\1#", x) for x in lines if "Schema: " not in x]

    s_codec, u_codec = CodecEmitter(stable, "s"), CodecEmitter(unstable, "u")
    s_types, u_types = TypesEmitter(stable, "d"), TypesEmitter(unstable, "d")
    s_types.emit("0", "s"), u_types.emit("0", "u")  # names the default objects
    checked = 0
    for name in sorted(reused):
        if name in stable.classes:
            c_s, c_u = stable.classes[name], unstable.classes[name]
            assert norm(s_codec.emit_class(c_s)) == norm(u_codec.emit_class(c_u)), name
            body_s = [x for x in s_types.emit_class(c_s) if not x.startswith('    """')]
            body_u = [x for x in u_types.emit_class(c_u) if not x.startswith('    """')]
            assert body_s == body_u, name
            checked += 1
        elif name in stable.unions:
            u_s, u_u = stable.unions[name], unstable.unions[name]
            assert norm(s_codec.emit_union(u_s)) == norm(u_codec.emit_union(u_u)), name
            checked += 1
    assert checked > 100
    # and a definition that changed does not
    changed = stable.classes["NewSessionRequest"], unstable.classes["NewSessionRequest"]
    assert norm(s_codec.emit_class(changed[0])) != norm(u_codec.emit_class(changed[1]))
