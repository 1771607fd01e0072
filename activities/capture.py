"""Wire capture: each model call's raw request and response, kept outside workflow history.

Opt-in, per run (`client.py run --capture`) or per worker (`LLM_CAPTURE=1`). A capture is a JSON
file named by the SHA-256 of its content in `LLM_CAPTURE_DIR` (default `.state/captures`); the
model reply in history carries only that 64-character key, so captures never bloat history.
Workers that should share captures with `client.py export` share the directory.

What is written: the request body exactly as sent (it never holds the key: that travels in a
header, which is not captured) and the response body exactly as received (for a stream, every
SSE line), with the key masked (durable_agent_runner.redact) should a server echo it.

With PAYLOAD_CODEC_KEYS set (durable_agent_runner/payloads/codec.py) a capture is encrypted like the payloads of
history: `<sha256>.enc` holds an encrypted payload, named by the hash of those bytes (so the name
says nothing of the content; a retried write leaves a second file, not a changed one). Reading
takes either form, so captures written before the codec was turned on still export.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from temporalio.api.common.v1 import Payload

from durable_agent_runner.config.env import DEFAULT_CAPTURE_DIR as DEFAULT_DIR
from durable_agent_runner.payloads.codec import ENV as CODEC_ENV
from durable_agent_runner.payloads.codec import EncryptionCodec, Keyring, keyring_from_env

if TYPE_CHECKING:  # durable_agent_runner.redact imports what imports this module
    from durable_agent_runner.redact import Redactor

__all__ = ["DEFAULT_DIR", "CaptureStore"]


class CaptureStore:
    """`keyring`: the keys to encrypt with; by default PAYLOAD_CODEC_KEYS's (read at each use, as
    the data converter reads it), None for plain files."""

    def __init__(self, root: Path, keyring: Keyring | Literal["env"] | None = "env") -> None:
        self.root = root
        self._keyring = keyring

    @property
    def codec(self) -> EncryptionCodec | None:
        keyring = keyring_from_env() if self._keyring == "env" else self._keyring
        return EncryptionCodec(keyring) if isinstance(keyring, Keyring) else None

    def put(self, record: dict[str, Any], redactor: Redactor | None = None) -> str:
        text = json.dumps(record, ensure_ascii=False, sort_keys=True)
        if redactor is not None:
            text = redactor.text(text)
        data, suffix = text.encode(), ".json"
        if (codec := self.codec) is not None:
            [sealed] = codec.encode_sync([Payload(metadata={"encoding": b"json/plain"}, data=data)])
            data, suffix = sealed.SerializeToString(), ".enc"
        key = hashlib.sha256(data).hexdigest()
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{key}{suffix}"
        if not path.exists():  # content-addressed: a retried write is a no-op
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return key

    def get(self, key: str) -> dict[str, Any] | None:
        plain, sealed = self.root / f"{key}.json", self.root / f"{key}.enc"
        if plain.exists():
            text = plain.read_text(encoding="utf-8")
        elif sealed.exists():
            if (codec := self.codec) is None:
                raise ValueError(f"capture {key} is encrypted: set {CODEC_ENV} to read it")
            [payload] = codec.decode_sync([Payload.FromString(sealed.read_bytes())])
            text = payload.data.decode("utf-8")
        else:
            return None
        record: dict[str, Any] = json.loads(text)
        return record
