"""The hooks a `client.py serve-hooks --config FILE` ingress serves, read once at start: a JSON or
YAML object mapping each hook's name to what it starts.

    alerts:
      agent: triage
      secret_env: ALERTS_HOOK_SECRET      # or `secret: ...` (better kept out of files)
      kind: generic                       # github | slack | generic: the signature scheme
      input: "Alert {alert.name} on {alert.host}"
      delivery_header: X-Alert-Id         # optional, generic only: the signed id's header (X-Delivery-Id)
      delivery_field: alert.id            # optional: a field of the body that is the delivery's id
      session: support-chat-1a2b          # optional: message this session instead of starting a run
      builder: my_hooks:issue_input       # optional: a function (body, headers) -> str builds the input

A bad file is a HookConfigError with one line naming the hook and the field; a secret is a
SecretStr from then on, so it never shows in a repr, a log or an answer."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from durable_agent_runner.client import checks
from durable_agent_runner.client.schedule_specs import NAME
from durable_agent_runner.config.env import named_secret
from durable_agent_runner.config.files import repeated_key, yaml_once
from durable_agent_runner.webhooks.signatures import DELIVERY_ID

MAX_BODY = 1024 * 1024  # bytes of one delivery (GitHub's own payloads are capped at 25 MB; ours is the run's input)

MAX_CONFIG_BYTES = 1024 * 1024
MAX_TEMPLATE = 100_000
Kind = Literal["github", "slack", "generic"]
Builder = Callable[[Any, Mapping[str, str]], str]
# Where each kind's delivery id comes from unless the hook says: a signed header (generic's only:
# GitHub's X-GitHub-Delivery is not signed, so a github hook's delivery is its body), or a field of
# the body (Slack's Events API retries carry the same event_id; X-Slack-Retry-Num says it is a retry).
DELIVERY_FIELDS: dict[str, str | None] = {"github": None, "slack": "event_id", "generic": None}
HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,99}")
FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z0-9_.\-]+)\}")  # {{ and }} are braces; {a.b} a field


class HookConfigError(ValueError):
    """A hooks file that cannot be served: one line saying where and why."""


class Hook(BaseModel):
    """One hook: what a signed POST to /hooks/NAME starts. In Python, `build` may take the place
    of `input`: a function of the parsed body and the request's headers that returns the input."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str = ""
    agent: str = ""
    secret: SecretStr | None = None
    secret_env: str | None = None
    kind: Kind = "generic"
    input: str = Field(default="", max_length=MAX_TEMPLATE)
    delivery_header: str | None = None
    delivery_field: str | None = None  # a dotted path into the body, e.g. event_id
    session: str | None = None
    builder: str | None = None  # "module:function", imported at start
    build: Builder | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _whole(self) -> Hook:
        if self.session is None and not self.agent:
            raise ValueError("agent/session: give one of agent (start its runs) or session (message it)")
        if self.session is None:
            checks.agent(self.agent)
        elif self.agent:  # one would be dropped unsaid: as `schedule create` says
            raise ValueError("agent/session: give one of agent (start its runs) or session (message it)")
        else:
            checks.run_id(self.session, "session", checks.MAX_ANY_ID)
        if (self.secret is None) == (self.secret_env is None):
            raise ValueError("give one of secret or secret_env (the name of an environment variable that holds it)")
        if not (self.input or self.builder or self.build):
            raise ValueError("give input (a template such as 'Triage {issue.title}') or builder")
        if self.input and (self.builder or self.build):  # the builder would win, the template unread
            raise ValueError("give one of input (a template) or builder (a function), not both")
        lone = re.search(r"[{}]", FIELD.sub("", self.input))
        if lone is not None:
            raise ValueError(
                f"input: a lone {lone.group()!r} that is no field: write {{field}} or {{a.b}} for a field of "
                "the body (letters, digits, _ . -), and {{ or }} for a brace"
            )
        if self.delivery_header is not None and self.kind != "generic":
            raise ValueError(
                f"delivery_header: a {self.kind} hook's headers are not signed, so its delivery is its body "
                "(or delivery_field); only a generic hook signs its delivery id header"
            )
        if self.delivery_header is not None and not HEADER_NAME.fullmatch(self.delivery_header):
            raise ValueError("delivery_header: a header's name is 1-100 letters, digits or '-'")
        return self

    def key(self) -> bytes:
        """The secret's bytes, read from its variable when it names one (at start: a missing one
        stops the ingress before it serves)."""
        if self.secret is not None:
            value = self.secret.get_secret_value()
        else:
            value = named_secret(self.secret_env or "")
            if not value:
                raise HookConfigError(f"hook {self.name}: the environment variable {self.secret_env} is not set")
        if len(value) < 8:
            raise HookConfigError(f"hook {self.name}: its secret is shorter than 8 characters")
        return value.encode()

    def delivery_source(self) -> tuple[str | None, str | None]:
        """(signed header, body field) the delivery id is read from, in that order (else the body's
        digest): a header only for generic, whose signature covers it."""
        header = (self.delivery_header or DELIVERY_ID) if self.kind == "generic" else None
        return header, self.delivery_field or DELIVERY_FIELDS[self.kind]


def _builder(hook: Hook) -> Builder | None:
    if hook.build is not None or hook.builder is None:
        return hook.build
    module, _, attr = hook.builder.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as err:
        raise HookConfigError(f"hook {hook.name}: cannot import builder {hook.builder!r}: {err}") from None
    if not callable(fn):
        raise HookConfigError(f"hook {hook.name}: builder {hook.builder!r} is not a function")
    return fn  # type: ignore[no-any-return]  # a user's function, called with (body, headers)


def hooks_from(raw: object) -> dict[str, Hook]:
    """Hooks from a parsed file (or a dict in Python), each checked, its secret and builder found."""
    if not isinstance(raw, dict) or not raw:
        raise HookConfigError("the hooks file must hold an object mapping each hook's name to its settings")
    out: dict[str, Hook] = {}
    for name, spec in raw.items():
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise HookConfigError(
                f"{str(name)[:40]!r}: a hook's name is 1-100 letters, digits, '.', '_' or '-', first a letter or digit"
            )
        if isinstance(spec, Hook):
            hook = spec.model_copy(update={"name": name})
        elif isinstance(spec, dict):
            try:
                hook = Hook.model_validate({**spec, "name": name})
            except ValidationError as err:
                field, message = checks.first_error(err)
                raise HookConfigError(f"hook {name}: {field + ': ' if field else ''}{message}") from None
        else:
            given = {list: "a list", str: "text", type(None): "empty"}.get(type(spec), type(spec).__name__)
            raise HookConfigError(
                f"hook {name}: its settings must be an object (agent: or session:, input:, secret_env:, ...), "
                f"not {given}: the file maps each hook's name to its settings"
            )
        hook.key()
        hook.build = _builder(hook)
        out[hook.name] = hook
    return out


def load(path: Path) -> dict[str, Hook]:
    """The hooks of a JSON or YAML file (by its suffix: .json is JSON, anything else YAML, which
    reads JSON too)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise HookConfigError(f"cannot read {path}: {err.strerror or err}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise HookConfigError(f"{path} is larger than 1 MiB")
    as_json = path.suffix.lower() == ".json"
    try:
        text = data.decode("utf-8-sig")
        raw = json.loads(text) if as_json else yaml_once(text)
        if as_json and (key := repeated_key(text)) is not None:  # JSON keeps the last without a word
            raise ValueError(f"{key!r} is given twice in one object")
    except ValueError as err:  # not UTF-8, not JSON, or a key given twice
        raise HookConfigError(f"{path} is not valid {'JSON' if as_json else 'YAML'}: {err}"[:300]) from None
    except yaml.YAMLError as err:  # its own text spans lines: the line and the problem, in one
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise HookConfigError(
            f"{path} is not valid YAML{where}: {getattr(err, 'problem', None) or 'unreadable'}"
        ) from None
    return hooks_from(raw)


class MissingField(LookupError):
    """A template's field the body does not have: the ingress answers 422 naming it."""

    def __init__(self, field: str) -> None:
        super().__init__(f"the body has no field {field!r}, which the hook's input needs")
        self.field = field


def pick(body: Any, path: str) -> Any:
    """The value at a dotted path of the body (`issue.title`, `items.0.id`); MissingField if none."""
    value = body
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise MissingField(path)
    return value


def render(template: str, body: Any) -> str:
    """The template with each `{field}` or `{a.b}` replaced by that field of the body (text as it
    is, anything else as JSON); `{{` and `}}` are braces."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)[0]
        value = pick(body, match.group(1))
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return FIELD.sub(one, template)
