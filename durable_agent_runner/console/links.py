"""The console's links: the runs page's next-page links (the server's page token, signed with the
console's key, so only links this console made reach Temporal: a forged token cost it seconds of
retries, then a 500; a link that is not one is a BadRequest, 400), and the links a notification
carries to a waiting call in the inbox or to a run's page (activities/notify.py). Those carry no
credential: off localhost, the console asks for its token as for any other page."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from urllib.parse import quote


class BadRequest(Exception):
    """A filter or a link the console cannot use: 400, with what to do."""


MAX_PAGE_LINK = 4096  # characters of a next-page link's token
MAC = 16  # bytes of a page link's signature


def seal(token: bytes, key: bytes) -> str:
    """The server's next-page token as a link's value, signed with the console's key."""
    mac = hmac.new(key, token, hashlib.sha256).digest()[:MAC]
    return base64.urlsafe_b64encode(mac + token).decode()


def unseal(text: str, key: bytes) -> bytes | None:
    """A link's value back as the server's token (None: the first page); BadRequest unless this
    console made it."""
    if not text:
        return None
    refused = BadRequest("that page link is not one this console made (or it has restarted since): start from page one")
    if len(text) > MAX_PAGE_LINK:
        raise refused
    try:
        raw = base64.urlsafe_b64decode(text.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise refused from None
    mac, token = raw[:MAC], raw[MAC:]
    if not token or not hmac.compare_digest(mac, hmac.new(key, token, hashlib.sha256).digest()[:MAC]):
        raise refused
    return token


def call_anchor(run_id: str, call_id: str) -> str:
    """The id of a waiting call's row in the inbox (and on its run's page): a link's #fragment."""
    return f"call-{run_id}/{call_id}"


def inbox_link(console_url: str, run_id: str, call_id: str) -> str:
    """The console's inbox, scrolled to the call waiting for a person."""
    return f"{console_url.rstrip('/')}/inbox#{quote(call_anchor(run_id, call_id), safe='/')}"


def run_link(console_url: str, run_id: str) -> str:
    """A run's page in the console (a run paused on its budget is resumed there)."""
    return f"{console_url.rstrip('/')}/runs/{quote(run_id, safe='')}"


def eval_href(eval_id: str) -> str:
    """An eval's page in the console (one paused on its budget is raised there)."""
    return f"/evals/{quote(eval_id, safe='')}"
