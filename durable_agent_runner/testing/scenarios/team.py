"""The `team` model: plays every agent of a support team (examples/support_team.py) offline, as a
`FunctionModel` (a function of the request, as a user writes one: docs/testing.md).

Which agent is asking, and what it does next, is read from the request alone (the tools
offered, the response format asked for, the messages so far), so it needs no agent list:

  transfer tools offered,         hand off: transfer_to_refunds when the customer asks for a
  no transfer yet                 refund, else transfer_to_billing (else the first transfer tool)
  a tool of its own not yet       call the first one: an agent offered as a tool gets
  called since the user spoke     {"input": "Look up order N ..."}; a function tool gets its
                                  required arguments (an order id, found in the conversation)
  its tool has answered           with a response format: JSON with the schema's own properties,
                                  filled from what the tools returned; else a short text answer

So the scenario fits whatever names the example gives its agents, tools and output type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from durable_agent_runner.testing.fake_llm.conversation import as_dict, as_list
from durable_agent_runner.testing.models import FunctionModel
from durable_agent_runner.testing.request import ModelRequest
from durable_agent_runner.testing.steps import Step, call, output, reply
from durable_agent_runner.workflows.types import ToolMessage

TRANSFER = "transfer_to_"
_REFUND = re.compile(r"\brefund", re.I)
_ORDER = re.compile(r"\border\b\s*(?:number|no\.?|id)?\s*[#:]?\s*([A-Za-z0-9-]*\d[A-Za-z0-9-]*)", re.I)
_HASH_ID = re.compile(r"#\s*(\d{3,})")


def team(request: ModelRequest) -> Step:
    """This turn of whichever team agent sent `request`."""
    tools = request.tool_schemas
    results = request.tool_results
    called = {r.name for r in results}
    transfers = [name for name in tools if name.startswith(TRANSFER)]
    if transfers and not any(name.startswith(TRANSFER) for name in called):
        wanted = TRANSFER + ("refunds" if _REFUND.search(request.prompt) else "billing")
        return call(wanted if wanted in transfers else transfers[0])
    own = [name for name in tools if not name.startswith(TRANSFER)]
    order = order_id(request.prompt)
    if own and not called & set(own):
        name = own[0]
        arguments = _arguments(tools[name], order, request.prompt)
        if arguments is None:
            return reply("Which order is this about? Please send me its order number.")
        return call(name, arguments)
    mine = [r for r in results if r.name in own]
    schema = request.output_schema
    if schema is not None:
        return output(fill(schema, _facts(order, mine), schema))
    return reply(_summary(order, mine))


TEAM = FunctionModel(team)


# ------------------------------------------------------------------------------ the request


def order_id(text: str) -> str | None:
    found = _ORDER.search(text) or _HASH_ID.search(text)
    return found.group(1) if found else None


# -------------------------------------------------------------------------------- calling


def _arguments(parameters: Mapping[str, Any], order: str | None, text: str) -> dict[str, Any] | None:
    """Arguments for a tool: its required ones, plus any about an order. None when it needs an
    order id and the conversation names none."""
    props = as_dict(parameters.get("properties")) or {}
    required = [p for p in as_list(parameters.get("required")) or [] if isinstance(p, str)]
    if list(props) == ["input"]:  # an agent offered as a tool: a request it can act on alone
        ask = f"Look up order {order}: what was bought, its status, and every charge made for it." if order else ""
        return {"input": ask or text}
    out: dict[str, Any] = {}
    for name, prop in props.items():
        if "order" in name.lower():
            if order is None:
                return None
            out[name] = int(order) if _type(prop, parameters) == "integer" and order.isdigit() else order
        elif name in required:
            out[name] = _default(_type(prop, parameters), text)
    return out


def _default(kind: str, text: str) -> Any:
    return {"string": text, "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}.get(kind)


# ------------------------------------------------------------------------------ answering


@dataclass(frozen=True)
class _Facts:
    order: str
    record: dict[str, Any] | None  # the first JSON object the tools returned
    amount: float  # what to refund: a charge made twice, else 0
    refund: bool
    currency: str
    reason: str


def _facts(order: str | None, results: Sequence[ToolMessage]) -> _Facts:
    record = next((r for r in (_first_object(x.content) for x in results) if r is not None), None)
    order = order or str(_field(record or {}, "order") or "unknown")
    if record is None:
        why = "; ".join(_snippet(r.content) for r in results) or "no record"
        return _Facts(order, None, 0.0, False, "USD", f"Could not look order {order} up ({why}), so no refund yet.")
    currency = str(_field(record, "currency") or "USD")
    charges = [_number(_field(c, "amount")) for c in _records(record)]
    amounts = [a for a in charges if a is not None]
    twice = next((a for a in amounts if amounts.count(a) > 1), None)
    if twice is not None:
        reason = (
            f"Order {order} was charged {twice:.2f} {currency} {_times(amounts.count(twice))}; "
            "the duplicate charge is refunded."
        )
        return _Facts(order, record, twice, True, currency, reason)
    shown = ", ".join(f"{a:.2f} {currency}" for a in amounts) or "no charges"
    reason = f"Order {order} shows {len(amounts)} charge(s) ({shown}) and no duplicate, so nothing is refunded."
    return _Facts(order, record, 0.0, False, currency, reason)


def fill(schema: Mapping[str, Any], facts: _Facts, root: Mapping[str, Any]) -> Any:
    """A value for `schema` made of the facts, by each property's name and type."""
    schema = _resolve(schema, root)
    props = as_dict(schema.get("properties"))
    if props is None:
        return _scalar("", schema, facts, root)
    return {name: _scalar(name, as_dict(prop) or {}, facts, root) for name, prop in props.items()}


def _scalar(name: str, prop: Mapping[str, Any], facts: _Facts, root: Mapping[str, Any]) -> Any:
    prop = _resolve(prop, root)
    lower = name.lower()
    enum = as_list(prop.get("enum"))
    if enum:
        yes = ("approve", "refund", "yes", "accept", "grant")
        wanted = [v for v in enum if isinstance(v, str) and any(w in v.lower() for w in yes) == facts.refund]
        return (wanted or enum)[0]
    kind = _type(prop, root)
    if kind == "boolean":
        return facts.refund
    if kind in ("integer", "number"):
        if "order" in lower and facts.order.isdigit():
            return int(facts.order)
        return round(facts.amount) if kind == "integer" else facts.amount
    if kind == "object":
        return fill(prop, facts, root)
    if kind == "array":
        return []
    if "order" in lower:
        return facts.order
    if "currency" in lower:
        return facts.currency
    return facts.reason


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """`schema` with a local $ref followed and an Optional's null branch dropped."""
    for _ in range(8):  # bounded: a self-referencing schema must not loop
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = (as_dict(target) or {}).get(part)
            schema = as_dict(target) or {}
            continue
        branches = as_list(schema.get("anyOf")) or as_list(schema.get("oneOf"))
        if branches:
            typed = [b for b in (as_dict(x) for x in branches) if b is not None and b.get("type") != "null"]
            schema = typed[0] if typed else {}
            continue
        break
    return schema


def _type(prop: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    kind = _resolve(prop, root).get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return kind if isinstance(kind, str) else "string"


def _summary(order: str | None, results: Sequence[ToolMessage]) -> str:
    """A plain-text answer: what the agent's tool returned, as one short paragraph."""
    if not results:
        return "I have no tool to look this up with."
    parts: list[str] = []
    for r in results:
        record = _first_object(r.content)
        if record is None or "error" in record:
            parts.append(f"{r.name} failed: {_snippet(r.content)}.")
            continue
        said = [f"{k.replace('_', ' ')} {v}" for k, v in record.items() if not isinstance(v, (list, dict))]
        nested = {k: v for k, v in record.items() if isinstance(v, (list, dict))}
        said += [f"{len(v)} {k.replace('_', ' ')}" for k, v in nested.items() if isinstance(v, list)]
        # Lists and objects go along whole, as JSON: another agent may need their details.
        details = f" Record: {json.dumps(record, ensure_ascii=False)}" if nested else ""
        parts.append(", ".join(said) + "." + details)
    about = f"order {order}" if order else "your request"
    return f"Here is what I found for {about}: " + " ".join(parts)


# -------------------------------------------------------------------------------- helpers


def _first_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text`: the whole text, or one embedded in prose."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        found = as_dict(value)
        if found is not None:
            return found
    return None


def _records(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The objects in the record's first list of objects (an order's charges)."""
    for value in record.values():
        items = [d for d in (as_dict(x) for x in as_list(value) or []) if d is not None]
        if items:
            return items
    return []


def _field(record: Mapping[str, Any], word: str) -> Any:
    """The value of the record's first key that mentions `word` (order → order_id)."""
    return next((v for k, v in record.items() if word in k.lower()), None)


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 120 else text[:117] + "..."
