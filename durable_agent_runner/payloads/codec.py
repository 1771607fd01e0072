"""Encrypted payloads: an AES-GCM payload codec whose key rotates, off unless asked for.

`PAYLOAD_CODEC_KEYS="id2:BASE64KEY,id1:BASE64KEY"` turns it on: the first key encrypts, every
listed key decrypts, so a new key goes first and old ones stay until nothing they wrote is still
read. A key is 16, 24 or 32 random bytes in base64 (`python -c "import base64, os;
print(base64.b64encode(os.urandom(32)).decode())"`). Each encrypted payload is the whole original
payload (metadata and data), serialized, sealed under AES-GCM with a fresh 96-bit nonce; its
metadata says `encoding: binary/encrypted` and names the key (`encryption-key-id`), which is also
bound into the seal, so a payload cannot be passed off as another key's. Payloads that are not
encrypted (written before the codec was on, or external-storage references) pass through.

The codec sits in the one data converter (config/connection.py), so it covers every payload the SDK
writes; the codec server (cli/codec_server.py) lets the Web UI read them; wire captures
(activities/capture.py) use `Keyring` directly. Keys are never logged or shown in a repr.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from durable_agent_runner.config.env import ClientSettings, SettingsError
from durable_agent_runner.payloads.store import PayloadStoreError

ENV = "PAYLOAD_CODEC_KEYS"
ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE = 12
# At most 20 characters: a key in base64 is longer, so an id echoed in an error is never a key
# (as it would be if someone wrote KEY:ID the wrong way round).
_KEY_ID_FORM = re.compile(r"[A-Za-z0-9._-]{1,20}")


class CodecConfigError(PayloadStoreError):
    """PAYLOAD_CODEC_KEYS is malformed. A PayloadStoreError so that the worker and client.py
    report it as they report a bad PAYLOAD_STORE: one line, exit code 2."""


class DecryptError(ValueError):
    """A payload cannot be decrypted: its key is unknown here, or it was altered."""


class Keyring:
    """Named AES keys; the first encrypts. Its repr names the key ids, never the keys."""

    def __init__(self, keys: Sequence[tuple[str, bytes]]) -> None:
        if not keys:
            raise CodecConfigError(f"{ENV}: no keys")
        self.current = keys[0][0]
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys}

    def __repr__(self) -> str:
        return f"Keyring(current={self.current!r}, ids={list(self._ciphers)!r})"

    @property
    def ids(self) -> list[str]:
        return list(self._ciphers)

    def seal(self, data: bytes) -> tuple[str, bytes]:
        """(key id, nonce + ciphertext + tag) under the current key."""
        nonce = os.urandom(NONCE)
        return self.current, nonce + self._ciphers[self.current].encrypt(nonce, data, self.current.encode())

    def open(self, key_id: str, sealed: bytes) -> bytes:
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise DecryptError(
                f"payload encrypted with key id {key_id!r}, which is not in {ENV} (known: {', '.join(self.ids)})"
            )
        try:
            return cipher.decrypt(sealed[:NONCE], sealed[NONCE:], key_id.encode())
        except InvalidTag:
            raise DecryptError(f"payload encrypted with key id {key_id!r} fails authentication: altered") from None

    @classmethod
    def parse(cls, text: str) -> Keyring:
        """From `id2:BASE64KEY,id1:BASE64KEY`. Errors name the item and the key id, never key bytes."""
        keys: list[tuple[str, bytes]] = []
        for n, item in enumerate(text.split(","), start=1):
            key_id, colon, encoded = item.strip().partition(":")
            if not colon or not _KEY_ID_FORM.fullmatch(key_id):
                raise CodecConfigError(
                    f"{ENV}: item {n} is not ID:BASE64KEY (an id of up to 20 letters, digits, '.', '_' or '-', "
                    "then a colon)"
                )
            if key_id in dict(keys):
                raise CodecConfigError(f"{ENV}: key id {key_id!r} is listed twice")
            try:
                key = base64.b64decode(encoded.strip(), validate=True)
            except (binascii.Error, ValueError):
                raise CodecConfigError(f"{ENV}: key {key_id!r} is not valid base64") from None
            if len(key) not in (16, 24, 32):
                raise CodecConfigError(f"{ENV}: key {key_id!r} is {len(key)} bytes; AES needs 16, 24 or 32")
            keys.append((key_id, key))
        return cls(keys)


def keyring_from_env(env: Mapping[str, str] | None = None) -> Keyring | None:
    """The keys PAYLOAD_CODEC_KEYS lists, or None when it is unset or blank (the codec is off)."""
    try:
        keys = ClientSettings.load(env).codec_keys
    except SettingsError as err:
        raise CodecConfigError(str(err)) from None
    text = keys.get_secret_value().strip() if keys is not None else ""
    return Keyring.parse(text) if text else None


class EncryptionCodec(PayloadCodec):
    """The PayloadCodec over a Keyring. The sync methods serve the codec server's threads."""

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring

    def encode_sync(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            key_id, sealed = self.keyring.seal(p.SerializeToString())
            out.append(Payload(metadata={"encoding": ENCODING, KEY_ID: key_id.encode()}, data=sealed))
        return out

    def decode_sync(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding") != ENCODING:
                out.append(p)
                continue
            key_id = p.metadata.get(KEY_ID, b"").decode("utf-8", "replace")
            out.append(Payload.FromString(self.keyring.open(key_id, p.data)))
        return out

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.encode_sync(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.decode_sync(payloads)


def codec_from_env(env: Mapping[str, str] | None = None) -> EncryptionCodec | None:
    keyring = keyring_from_env(env)
    return EncryptionCodec(keyring) if keyring is not None else None
