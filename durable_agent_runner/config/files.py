"""The files a person writes (an eval's dataset, the webhooks' hooks), read as plain values with
each key once: JSON and YAML both keep the last of a key given twice without a word, where a
person meant one (`name:` twice, a case's `inputs:` pasted over another's)."""

from __future__ import annotations

import json
from typing import Any

import yaml


class _OnceLoader(yaml.SafeLoader):
    """safe_load's plain values (no Python objects), refusing a mapping that gives a key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool | None):  # a key safe_load refuses itself
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark, f"{key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def yaml_once(text: str) -> Any:
    """YAML as safe_load reads it, a key given twice in one mapping refused (yaml.YAMLError, its
    problem saying which key, its problem_mark the line)."""
    return yaml.load(text, Loader=_OnceLoader)


def repeated_key(text: str) -> str | None:
    """The first key an object of the JSON `text` gives twice (`text` parsed and bounded already)."""
    repeated: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                repeated.append(key)
            seen.add(key)
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return repeated[0] if repeated else None
