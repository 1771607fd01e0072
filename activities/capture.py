"""Wire capture: each model call's raw request and response, kept outside workflow history.

Opt-in, per run (`client.py run --capture`) or per worker (`LLM_CAPTURE=1`). A capture is a JSON
file named by the SHA-256 of its content in `LLM_CAPTURE_DIR` (default `.state/captures`); the
model reply in history carries only that 64-character key, so captures never bloat history.
Workers that should share captures with `client.py export` share the directory.

What is written: the request body exactly as sent (it never holds the key: that travels in a
header, which is not captured) and the response body exactly as received (for a stream, every
SSE line), with the key masked (activities.redact) should a server echo it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # activities.redact imports the settings, which import this module
    from activities.redact import Redactor

DEFAULT_DIR = ".state/captures"


class CaptureStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, record: dict[str, Any], redactor: Redactor | None = None) -> str:
        text = json.dumps(record, ensure_ascii=False, sort_keys=True)
        if redactor is not None:
            text = redactor.text(text)
        key = hashlib.sha256(text.encode()).hexdigest()
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{key}.json"
        if not path.exists():  # content-addressed: a retried write is a no-op
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        return key

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.root / f"{key}.json"
        if not path.exists():
            return None
        record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return record
