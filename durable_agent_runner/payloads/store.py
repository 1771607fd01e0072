"""Large payloads leave history: temporalio's external storage, configured from the environment.

A payload of at least `PAYLOAD_STORE_THRESHOLD` bytes (default 256 KiB) is written to a store
and history keeps a small reference, so a 3 MB tool result, model reply, prompt or carried
transcript never meets Temporal's 2 MB payload or 4 MB message limits. Every process that
reads or writes runs (worker, client.py, tests, the replayer) must use the same store: they
all take it from `durable_agent_runner.config.connection.DATA_CONVERTER`.

`PAYLOAD_STORE` chooses it:
  local (default)        content-addressed files in `PAYLOAD_STORE_DIR` (default .state/payloads):
                         one machine, or a volume every worker and client mounts
  s3://BUCKET[/PREFIX]   temporalio.contrib's S3 driver  (pip install 'temporalio[aioboto3]')
  gs://BUCKET[/PREFIX]   temporalio.contrib's GCS driver (pip install 'temporalio[gcloud-aio-storage]')
Stored payloads are never deleted by Temporal; expire them after the namespace's retention.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.contrib.gcp.gcsdriver import GCSStorageDriver, GCSStorageDriverClient
from temporalio.converter import (
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from durable_agent_runner.config.env import ClientSettings, SettingsError

DEFAULT_DIR = ".state/payloads"
# temporalio's own default, and half the 512 KiB at which server and SDK start warning about a
# payload's size: ordinary messages stay inline (readable in the Web UI), big ones leave.
DEFAULT_THRESHOLD = 256 * 1024
_SHA256 = re.compile(r"[0-9a-f]{64}")


class PayloadStoreError(RuntimeError):
    """The store is misconfigured, or a stored payload is missing or corrupt."""


class LocalDirectoryDriver(StorageDriver):
    """Each payload as `<root>/<sha256[:2]>/<sha256>`: its serialized bytes, named by their hash.

    The claim holds only the hash, so the directory may be mounted at different paths on
    different machines. Writes are atomic (temporary file, then rename) and idempotent, so a
    retried activity or a replayed workflow task rewrites nothing; reads check the hash."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def name(self) -> str:
        return "local-dir"  # recorded in every reference: never rename

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        return [await asyncio.to_thread(self._write, p.SerializeToString()) for p in payloads]

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return [await asyncio.to_thread(self._read, c.claim_data) for c in claims]

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    def _write(self, data: bytes) -> StorageDriverClaim:
        digest = hashlib.sha256(data).hexdigest()
        path = self.path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{digest}.{os.getpid()}.{id(data)}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return StorageDriverClaim(claim_data={"hash_algorithm": "sha256", "hash_value": digest})

    def _read(self, claim: Mapping[str, str]) -> Payload:
        digest = claim.get("hash_value", "")
        if not _SHA256.fullmatch(digest):  # a forged reference must not name a path
            raise PayloadStoreError(f"not a payload reference of this store: {dict(claim)}")
        try:
            data = self.path(digest).read_bytes()
        except FileNotFoundError:
            raise PayloadStoreError(
                f"stored payload {digest} is not in {self.root.resolve()}: "
                "every worker and client must share PAYLOAD_STORE_DIR"
            ) from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise PayloadStoreError(f"stored payload {self.path(digest)} is corrupt (its hash does not match)")
        return Payload.FromString(data)


class LazyClient:
    """A cloud SDK's client, opened on first use (it must be opened inside the running event
    loop, and DATA_CONVERTER is built at import) and kept for the life of the process.

    Every object name gets `prefix` in front. References hold the name without it, so a changed
    prefix strands what was stored before."""

    def __init__(self, prefix: str) -> None:
        self.prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        self._lock = asyncio.Lock()
        self._stack = contextlib.AsyncExitStack()  # never closed: the client lives as long as the process
        self._opened: Any = None

    async def inner(self) -> Any:
        async with self._lock:
            if self._opened is None:
                self._opened = await self.open(self._stack)
            return self._opened

    async def open(self, stack: contextlib.AsyncExitStack) -> Any:
        raise NotImplementedError


class LazyS3Client(LazyClient, S3StorageDriverClient):
    async def open(self, stack: contextlib.AsyncExitStack) -> S3StorageDriverClient:
        import aioboto3  # type: ignore[import-not-found,unused-ignore]  # optional: temporalio[aioboto3]
        from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client

        return new_aioboto3_client(await stack.enter_async_context(aioboto3.Session().client("s3")))

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await (await self.inner()).put_object(bucket=bucket, key=self.prefix + key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return bool(await (await self.inner()).object_exists(bucket=bucket, key=self.prefix + key))

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        return bytes(await (await self.inner()).get_object(bucket=bucket, key=self.prefix + key))


class LazyGCSClient(LazyClient, GCSStorageDriverClient):
    async def open(self, stack: contextlib.AsyncExitStack) -> GCSStorageDriverClient:
        from gcloud.aio.storage import Storage  # type: ignore[import-not-found,unused-ignore]  # optional
        from temporalio.contrib.gcp.gcsdriver.gcloud_aio import new_gcloud_aio_client

        return new_gcloud_aio_client(await stack.enter_async_context(Storage()))

    async def put_object(self, *, bucket: str, object_name: str, data: bytes) -> None:
        await (await self.inner()).put_object(bucket=bucket, object_name=self.prefix + object_name, data=data)

    async def object_exists(self, *, bucket: str, object_name: str) -> bool:
        return bool(await (await self.inner()).object_exists(bucket=bucket, object_name=self.prefix + object_name))

    async def get_object(self, *, bucket: str, object_name: str) -> bytes:
        return bytes(await (await self.inner()).get_object(bucket=bucket, object_name=self.prefix + object_name))


# scheme -> the modules that must import (the SDK, temporalio's adapter), and the extra installing them
_CLOUD = {
    "s3": (("aioboto3", "temporalio.contrib.aws.s3driver.aioboto3"), "temporalio[aioboto3]"),
    "gs": (("temporalio.contrib.gcp.gcsdriver.gcloud_aio",), "temporalio[gcloud-aio-storage]"),
}


def driver_from(store: str, directory: str) -> StorageDriver:
    """The driver `PAYLOAD_STORE` names (see the module docstring)."""
    if store in ("", "local"):
        return LocalDirectoryDriver(Path(directory))
    url = urlsplit(store)
    if url.scheme not in _CLOUD or not url.netloc:
        raise PayloadStoreError(
            f"PAYLOAD_STORE={store!r}: expected local, s3://BUCKET[/PREFIX] or gs://BUCKET[/PREFIX]"
        )
    modules, extra = _CLOUD[url.scheme]
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError as err:
        raise PayloadStoreError(f"PAYLOAD_STORE={store} needs {err.name}: pip install '{extra}'") from None
    if url.scheme == "s3":
        return S3StorageDriver(LazyS3Client(url.path), url.netloc)
    return GCSStorageDriver(LazyGCSClient(url.path), url.netloc)


def external_storage(env: Mapping[str, str] | None = None) -> ExternalStorage:
    """The store configured by PAYLOAD_STORE, PAYLOAD_STORE_DIR and PAYLOAD_STORE_THRESHOLD."""
    try:  # the settings parse and bound the threshold (at most 2 MB, past which Temporal refuses a payload)
        s = ClientSettings.load(env)
    except SettingsError as err:
        raise PayloadStoreError(str(err)) from None
    threshold = DEFAULT_THRESHOLD if s.payload_store_threshold is None else s.payload_store_threshold
    driver = driver_from(s.payload_store, s.payload_store_dir or DEFAULT_DIR)
    return ExternalStorage(drivers=[driver], payload_size_threshold=threshold)
