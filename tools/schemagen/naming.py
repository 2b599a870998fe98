"""Naming rules: how wire names and tags become Python names.

Attributes are the snake_case forms of wire names (``_meta`` is ``meta``);
variant classes are PascalCase tags; a flattened union is named after what its
branches share. One place, so that the analysis and the emitters agree.
"""

from __future__ import annotations

import keyword
import re

#: The attribute that carries the wire keys no typed field holds.
EXTRA_ATTR = "extra_"
#: The wire name of the extension-metadata property.
META_WIRE = "_meta"


def snake(name: str) -> str:
    if name == META_WIRE:
        return "meta"
    out = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    out = re.sub(r"[^a-z0-9_]", "_", out)
    return out + "_" if keyword.iskeyword(out) else out


def pascal(tag: str) -> str:
    parts = re.split(r"[_\-\s/]+", re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", tag))
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def unknown_class_names(union: str) -> tuple[str, ...]:
    """Names for the class of a union's unknown variants, in order of preference."""
    return ("Unknown" + union, "Other" + union)


def common_prefix(names: list[str]) -> str:
    words = [re.findall(r"[A-Z][a-z0-9]*", n) for n in names]
    out = []
    for group in zip(*words, strict=False):
        if len(set(group)) != 1:
            break
        out.append(group[0])
    return "".join(out)


def common_suffix(names: list[str]) -> str:
    rev = [n[::-1] for n in names]
    words = [[w[::-1] for w in re.findall(r"[a-z0-9]*[A-Z]", r)] for r in rev]
    out = []
    for group in zip(*words, strict=False):
        if len(set(group)) != 1:
            break
        out.append(group[0])
    return "".join(reversed(out))
