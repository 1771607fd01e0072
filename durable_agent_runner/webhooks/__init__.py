"""Signed webhooks that start runs, once per delivery (docs/schedules-and-webhooks.md):
`client.py serve-hooks --config FILE`, or in Python `build_app(client, hooks_from({...}))`; with a
completion key, signed completion URLs of calls completed from outside (docs/outside-completion.md)."""

from durable_agent_runner.webhooks.app import MAX_BODY, build_app
from durable_agent_runner.webhooks.config import Hook, HookConfigError, hooks_from, load, render
from durable_agent_runner.webhooks.signatures import sign

__all__ = ["MAX_BODY", "Hook", "HookConfigError", "build_app", "hooks_from", "load", "render", "sign"]
