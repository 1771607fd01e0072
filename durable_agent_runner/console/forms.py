"""The console's forms read into values: numbers written with the ASCII digits only, a budget
raise (and the words for its refusal), a call's edited arguments (checked against its tool's
schema) and a paused run's edit.
A value that is not one is a Refused (400) with one line naming the field."""

from __future__ import annotations

import math
import re
from typing import Any

from durable_agent_runner.client.control import make_edit
from durable_agent_runner.client.errors import DecisionRefused
from durable_agent_runner.console import data
from durable_agent_runner.console.security import Refused
from durable_agent_runner.machine.bounds import OutsideDataError, parse_json
from durable_agent_runner.workflows import types as t

MAX_ARG_DEPTH = 32
# Numbers are written with the ASCII digits 0-9 only: Python's int() and str.isdigit() also take
# other scripts' digits ('٣' is 3) and superscripts, which a person never means here.
WHOLE = re.compile(r"[0-9]{1,9}")
INTEGER = re.compile(r"-?[0-9]{1,300}")
TOKENS = re.compile(r"[0-9]{1,12}")  # a raise: its bound (10**9) is the client's to say
USD = re.compile(r"[0-9]{1,9}(?:\.[0-9]{0,9})?|\.[0-9]{1,9}")  # a raise: dollars, maybe cents and less
DECIMAL = re.compile(r"-?(?:[0-9]{1,300}(?:\.[0-9]{0,300})?|\.[0-9]{1,300})(?:[eE][-+]?[0-9]{1,4})?")


def bounded_text(form: dict[str, str], name: str, limit: int) -> str:
    """A text field at most `limit` characters long, as its input's maxlength says; a longer one
    (a request not made by the page) is a 400 naming it, never cut unsaid."""
    text = form.get(name, "")
    if len(text) > limit:
        raise Refused(400, f"{name}: at most {limit:,} characters, not {len(text):,}")
    return text


def whole(text: str, name: str, low: int = 0) -> int:
    """A whole number from `low` written with the ASCII digits 0-9 (at most 9 of them); else 400."""
    if not WHOLE.fullmatch(text) or int(text) < low:
        raise Refused(400, f"{name} must be a whole number from {low}, written with the digits 0-9, not {text[:40]!r}")
    return int(text)


def budget_raise(form: dict[str, str]) -> tuple[int | None, float | None]:
    """The resume form's raise: tokens in ASCII digits, USD a decimal (dollars, maybe cents); an
    empty field raises nothing, unless the form is a session's raise alone (`between`: a session
    waiting for its next message). Their bounds are the client's (checks.budget_raise)."""
    tokens, usd = form.get("add_tokens", "").strip(), form.get("add_usd", "").strip()
    if tokens and not TOKENS.fullmatch(tokens):
        raise Refused(400, f"add tokens must be a whole number, written with the digits 0-9, not {tokens[:40]!r}")
    if usd and not USD.fullmatch(usd):
        raise Refused(400, f"add USD must be a decimal number of dollars (the digits 0-9, a .), not {usd[:40]!r}")
    if form.get("between") == "1" and not (tokens or usd):
        raise Refused(400, "add tokens or USD to raise its budget")
    return (int(tokens) if tokens else None), (float(usd) if usd else None)


def resume_refusal(err: DecisionRefused, form: dict[str, str]) -> str | None:
    """The console's words for a run's refusal of a resume (None: shown as the run said it)."""
    own = str(err).partition(" refused it: ")[2] or str(err)  # the run's words, without "run X refused it"
    if form.get("between") == "1" and err.kind == "NotPaused":
        return f"the raise is refused: {own} (a session takes a raise alone while it waits for its next message)"
    if err.kind == "BudgetNotRaised":
        return "the run is paused on its budget: add tokens or USD to resume it, or cancel it"
    if err.kind in ("BeyondParentGrant", "NoBudget"):
        return f"the raise is refused: {own}"
    return None


def _json(text: str, name: str) -> Any:
    try:
        return parse_json(text, max_depth=MAX_ARG_DEPTH)
    except OutsideDataError as err:
        raise Refused(400, f"{name}: not valid JSON ({err})") from None


def edited_arguments(form: dict[str, str]) -> dict[str, Any]:
    """The edit form's fields (`KIND.NAME`, views.PREFIX) as the call's arguments; an empty field
    is left out. Whether they fit the tool's schema is the run's to say (its validator)."""
    if "arguments" in form:
        value = _json(form["arguments"], "arguments")
        if not isinstance(value, dict):
            raise Refused(400, "arguments must be a JSON object")
        return value
    out: dict[str, Any] = {}
    for key, raw in form.items():
        kind, _, name = key.partition(".")
        if not name or kind not in ("int", "num", "str", "bool", "json") or (raw == "" and kind != "str"):
            continue
        if kind == "int":
            if not INTEGER.fullmatch(raw.strip()):
                raise Refused(400, f"{name}: {raw[:40]!r} is not a whole number (the digits 0-9, maybe a -)")
            out[name] = int(raw.strip())
        elif kind == "num":
            number = float(raw.strip()) if DECIMAL.fullmatch(raw.strip()) else math.nan
            if not math.isfinite(number):
                raise Refused(400, f"{name}: {raw[:40]!r} is not a number (the digits 0-9, a . and an exponent)")
            out[name] = number
        elif kind == "bool":
            out[name] = raw == "true"
        elif kind == "json":
            out[name] = _json(raw, name)
        else:
            out[name] = raw
    return out


def checked_edit(form: dict[str, str], arguments: dict[str, Any], waiting: data.Waiting) -> dict[str, Any]:
    """The edited arguments, checked against the tool's schema here first: a required field left
    empty is refused with its name (the form marks it `required` too). A field too long to edit
    in a page (`keep.NAME`, views.edit_form) keeps the call's own value."""
    original = waiting.call.arguments
    for key in form:
        kind, _, name = key.partition(".")
        if kind == "keep" and name in original:
            arguments[name] = original[name]
    if "arguments" in form:  # one JSON box: the run checks it against the schema
        return arguments
    schema = waiting.schema
    props = schema.get("properties")
    required = schema.get("required")
    if not isinstance(props, dict) or not isinstance(required, list):
        return arguments
    empty = [
        str(name)
        for name in required
        if name in props
        and (name not in arguments or (isinstance(arguments[name], str) and not arguments[name].strip()))
    ]
    if empty:
        raise Refused(400, f"{', '.join(empty)} {'is' if len(empty) == 1 else 'are'} required: give a value")
    return arguments


def run_edit(form: dict[str, str], by: str) -> t.Edit:
    """One edit of a paused run from the form, as `client.py edit` builds it (the client's make_edit)."""
    op = form.get("op", "")
    ns: dict[str, Any] = {}
    text, index, call_id = form.get("text", ""), form.get("index", "").strip(), form.get("call_id", "").strip()
    if op in ("text", "drop", "insert"):
        at = whole(index, f"{op}: the item index")
    if op == "text":
        ns["text"] = (str(at), text)
    elif op == "drop":
        ns["drop"] = at
    elif op == "insert":
        ns["insert"] = (str(at), form.get("role", "user"), text)
    elif op == "args":
        ns["args"] = (call_id, text)
    elif op == "drop_call":
        ns["drop_call"] = call_id
    elif op == "agent":
        ns["agent"] = form.get("agent", "").strip()
    else:
        raise Refused(400, "edit must be one of text, drop, insert, args, drop_call, agent")
    return make_edit(**ns, by=by)
