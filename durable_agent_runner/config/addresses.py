"""Email addresses as the settings and the notification activity take them: checked once, where
they come in, so none can carry a second header or a hidden recipient into a message."""

from __future__ import annotations

from durable_agent_runner.workflows.types.notify import MAX_RECIPIENTS  # of one notification's email

MAX_ADDRESS = 254  # characters of an email address (RFC 5321's path limit)


def email_address(text: str) -> str:
    """One email address as it may go into a header: `local@domain`, ASCII, without blanks, line
    breaks, quotes, brackets or commas (each would make it another header or several addresses)."""
    address = text.strip()
    local, at, domain = address.rpartition("@")
    odd = set(address) & set(" \t\r\n<>,;\"'()[]\\")
    if not (at and local and domain) or odd or len(address) > MAX_ADDRESS or not address.isascii():
        raise ValueError("an email address (local@domain)")
    return address


def email_list(text: str) -> list[str]:
    """Addresses separated by commas, at most MAX_RECIPIENTS."""
    try:
        addresses = [email_address(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError("email addresses (local@domain) separated by commas") from None
    if len(addresses) > MAX_RECIPIENTS:
        raise ValueError(f"at most {MAX_RECIPIENTS} email addresses")
    return addresses
