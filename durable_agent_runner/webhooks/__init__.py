"""Signed webhooks that start runs, once per delivery (docs/schedules-and-webhooks.md):
`client.py serve-hooks --config FILE`, or in Python `build_app(client, hooks_from({...}))`; with a
completion key, signed completion URLs of calls completed from outside (docs/outside-completion.md)."""

from typing import TYPE_CHECKING

from durable_agent_runner.webhooks.config import MAX_BODY, Hook, HookConfigError, hooks_from, load, render
from durable_agent_runner.webhooks.signatures import generic_headers, sign

if TYPE_CHECKING:
    from durable_agent_runner.webhooks.app import build_app


def __getattr__(name: str) -> object:
    """`build_app` on first use: the web framework is loaded where a server is built, not by every
    `client.py` command that only reads the hooks' settings."""
    if name == "build_app":
        from durable_agent_runner.webhooks.app import build_app

        return build_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MAX_BODY",
    "Hook",
    "HookConfigError",
    "build_app",
    "generic_headers",
    "hooks_from",
    "load",
    "render",
    "sign",
]
