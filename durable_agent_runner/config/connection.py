"""One way to reach Temporal, shared by the worker, the client, the tests and the replayer:
the same connection settings and the same data converter everywhere.

Where and how to connect comes from `temporalio.envconfig`, which reads what the `temporal` CLI
reads: a profile in its TOML file (`TEMPORAL_CONFIG_FILE`, default
~/.config/temporalio/temporal.toml; profile `TEMPORAL_PROFILE`, default "default") under the
TEMPORAL_* variables (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`,
`TEMPORAL_TLS`, `TEMPORAL_TLS_CLIENT_CERT_PATH`, `TEMPORAL_TLS_CLIENT_KEY_PATH`,
`TEMPORAL_TLS_SERVER_CA_CERT_PATH`, `TEMPORAL_TLS_SERVER_NAME`, their `_DATA` forms, …). An API
key turns TLS on. Without any of it: localhost:7233, namespace "default", no TLS.

The data converter is pydantic's, with payloads encrypted when PAYLOAD_CODEC_KEYS is set
(durable_agent_runner/payloads/codec.py), large payloads kept in the payload store instead of history
(durable_agent_runner/payloads/store.py) and failure texts cut to a size Temporal accepts. The SDK encrypts
first and then offloads, so the store only ever holds ciphertext; history holds the store's
reference, which names a hash and nothing of the content."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import ClassVar

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.failure.v1 import Failure
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverter, PayloadConverter
from temporalio.envconfig import ClientConfigProfile, ClientConnectConfig
from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig
from temporalio.service import RPCError, RPCStatusCode, TLSConfig

from durable_agent_runner.config.env import ClientSettings
from durable_agent_runner.machine.texts import cut
from durable_agent_runner.payloads.codec import codec_from_env
from durable_agent_runner.payloads.store import PayloadStoreError, external_storage
from durable_agent_runner.workflows.types import SEARCH_ATTRIBUTES

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "agent-runner"
MAX_FAILURE_TEXT = 64 * 1024  # characters of a failure's message, and of its stack trace
CORE_LOG = logging.getLogger("temporalio.core")  # the SDK core's own log records
ENCODED_FAILURE = "Encoded failure"
MAX_CONNECT_TEXT = 400  # characters of the core's own connection error quoted in ours
NAMESPACE_CHECK = timedelta(
    seconds=10
)  # the bound on asking whether the namespace exists  # what temporalio leaves in place of a message it encoded


class ConnectionConfigError(PayloadStoreError):
    """The connection settings (profile file, TEMPORAL_* variables, a TLS file they name) are
    wrong. A PayloadStoreError so that the worker and client.py report it as they report a bad
    PAYLOAD_STORE: one line, exit code 2."""


class NamespaceNotFound(ConnectionConfigError):
    """The namespace the settings name does not exist on the server (found when connecting, so
    that no command reads it as "no run with id")."""


class BoundedFailureConverter(DefaultFailureConverter):
    """A failure's message and stack trace are strings, not payloads, so external storage cannot
    move them: past 2 MB Temporal refuses the workflow task (retried forever: the run wedges) or
    swaps the text for "Failure exceeds size limit."; past 4 MB an activity's completion never
    arrives. A tool that raises with a huge message is cut here instead.

    With `encrypt`, each level's message and stack trace then move into its encoded attributes
    (temporalio's `encode_common_attributes`), a payload the codec encrypts like any other."""

    encrypt = False

    def __init__(self) -> None:
        super().__init__(encode_common_attributes=False)  # done below, after the cut

    def to_failure(self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure) -> None:
        super().to_failure(exception, payload_converter, failure)  # causes come through here first
        level: Failure | None = failure
        while level is not None:
            if level.message != ENCODED_FAILURE or level.stack_trace:  # not yet done (a copied proto may hold text)
                level.message = cut(level.message, MAX_FAILURE_TEXT)
                level.stack_trace = cut(level.stack_trace, MAX_FAILURE_TEXT)
                if self.encrypt:
                    attributes = {"message": level.message, "stack_trace": level.stack_trace}
                    level.encoded_attributes.CopyFrom(payload_converter.to_payloads([attributes])[0])
                    level.message, level.stack_trace = ENCODED_FAILURE, ""
            level = level.cause if level.HasField("cause") else None


class EncryptedFailureConverter(BoundedFailureConverter):
    encrypt = True


class OnePayloadConverter(PydanticPayloadConverter):
    """pydantic's payload converter, one per process. temporalio builds a data converter's
    payload converter anew each time it copies the data converter (about a dozen times a turn in
    a worker: per workflow activation and per payload it may store, and once per run), each with
    an empty cache of pydantic TypeAdapters; this one is built once and its cache serves them all."""

    _one: ClassVar[OnePayloadConverter | None] = None

    def __new__(cls) -> OnePayloadConverter:
        if cls._one is None:  # two threads racing here build two; one is kept: harmless
            one = super().__new__(cls)
            PydanticPayloadConverter.__init__(one)
            cls._one = one
        return cls._one

    def __init__(self) -> None:
        """Built once, in __new__."""


def make_data_converter(env: Mapping[str, str] | None = None) -> DataConverter:
    """The data converter for these settings (default: the process's environment)."""
    codec = codec_from_env(env)
    return dataclasses.replace(
        pydantic_data_converter,
        payload_converter_class=OnePayloadConverter,
        payload_codec=codec,
        failure_converter_class=EncryptedFailureConverter if codec else BoundedFailureConverter,
        external_storage=external_storage(env),
    )


@functools.cache
def data_converter() -> DataConverter:
    """Built on first use, not at import: a bad PAYLOAD_STORE or PAYLOAD_CODEC_KEYS setting is
    then reported by the command that needs it, as one clear line, instead of a traceback at
    import time."""
    return make_data_converter()


def __getattr__(name: str) -> DataConverter:
    if name == "DATA_CONVERTER":  # `from durable_agent_runner.config.connection import DATA_CONVERTER` still works
        return data_converter()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def connect_config(env: Mapping[str, str] | None = None) -> ClientConnectConfig:
    """`Client.connect`'s arguments from the profile and the TEMPORAL_* variables (see the module
    docstring), with the address and namespace always set."""
    try:
        config = ClientConfigProfile.load(override_env_vars=env).to_client_connect_config()
    except OSError as err:  # a certificate or key file named but not readable
        raise ConnectionConfigError(f"Temporal TLS settings: cannot read {err.filename}: {err.strerror}") from None
    except RuntimeError as err:  # the SDK's ConfigError: a bad TOML file, an unknown profile
        raise ConnectionConfigError(f"Temporal connection settings: {' '.join(str(err).split())}") from None
    config.setdefault("target_host", DEFAULT_ADDRESS)
    config.setdefault("namespace", DEFAULT_NAMESPACE)
    return config


def _variables_only() -> ClientConnectConfig:
    """What the TEMPORAL_* variables alone say, as envconfig reads them (the file aside: it is
    what failed); empty when they cannot be read either."""
    try:
        return ClientConfigProfile.load(disable_file=True).to_client_connect_config()
    except (OSError, RuntimeError):
        return {}


def address() -> str:
    try:
        return connect_config()["target_host"]
    except ConnectionConfigError:  # only named in messages; connect() reports the error itself
        return _variables_only().get("target_host") or DEFAULT_ADDRESS


def namespace() -> str:
    try:
        return connect_config()["namespace"]
    except ConnectionConfigError:
        return _variables_only().get("namespace") or DEFAULT_NAMESPACE


def task_queue() -> str:
    """$AGENT_TASK_QUEUE, checked by the settings model (durable_agent_runner/config/env.py)."""
    return str(ClientSettings.load().task_queue)


async def connect(
    target: str | None = None,
    ns: str | None = None,
    converter: DataConverter | None = None,
) -> Client:
    """A client as the settings say (see the module docstring). An explicit `target` is a plain
    connection to that server, ignoring the profile's TLS and API key (the tests, the bench)."""
    config: ClientConnectConfig = {"target_host": target} if target else connect_config()
    converter = converter or data_converter()  # its setting errors are the caller's to report, not wrapped below
    try:
        client = await Client.connect(
            config["target_host"],
            namespace=ns or config.get("namespace", DEFAULT_NAMESPACE),
            api_key=config.get("api_key"),
            tls=config.get("tls", False),
            rpc_metadata=config.get("rpc_metadata", {}),
            data_converter=converter,
            runtime=core_runtime(),
        )
    except RuntimeError as err:  # the core's connection errors: often several lines of Rust debug output
        raise ConnectionError(
            f"cannot reach Temporal at {config['target_host']}: {connect_error(err, config)}"
        ) from None
    await check_namespace(client, config["target_host"])
    return client


async def check_namespace(client: Client, target: str) -> None:
    """NamespaceNotFound when the client's namespace does not exist: the server would answer each
    later call "not found", which a command reads as "no run with id" and a worker as polls that
    fail. Anything else (not allowed to describe it, a slow server) is left to the calls to tell."""
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace), timeout=NAMESPACE_CHECK
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise NamespaceNotFound(
                f"namespace {client.namespace!r} does not exist on {target}: set TEMPORAL_NAMESPACE (or the "
                "profile's namespace) to one that does, or create it: temporal operator namespace create"
            ) from None


# How the core reports a connection the server dropped (rustls, hyper and tonic word it differently;
# hyper's "connection was not ready": dropped before the first call went out, seen against mTLS).
_CLOSED = (
    "connection closed", "connectionreset", "connection reset", "unexpectedeof", "close_notify", "broken pipe",
    "connection was not ready",
)  # fmt: skip


def connect_error(err: BaseException, config: ClientConnectConfig) -> str:
    """The core's connection error as one line, with what to set when it is about TLS. A server
    that wants a client certificate does not always get its alert through before closing, so a
    connection closed during TLS setup without one configured gets that hint too."""
    text = " ".join(str(err).split())
    lower = text.lower()
    tls = config.get("tls")
    closed = any(sign in lower for sign in _CLOSED)
    has_cert = isinstance(tls, TLSConfig) and tls.client_cert is not None
    client_cert = (
        "set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH "
        "(or the profile's tls.client_cert_path and tls.client_key_path)"
    )
    address_hint = (
        "set TEMPORAL_ADDRESS (or the profile's address) to the server's host:port, "
        "or start one: temporal server start-dev"
    )
    if "connectionrefused" in lower or "connection refused" in lower:
        return f"nothing listens there (connection refused); {address_hint}"
    if "dns error" in lower or "failed to lookup address" in lower:
        return f"its host name does not resolve; {address_hint}"
    if "certificaterequired" in lower or "certificate required" in lower:
        hint = f"the server requires a client certificate: {client_cert}"
    elif "unknownissuer" in lower or "invalidcertificate" in lower:
        hint = (
            "the server's certificate is not trusted: set TEMPORAL_TLS_SERVER_CA_CERT_PATH to the CA that "
            "signed it, or TEMPORAL_TLS_SERVER_NAME to the name it holds"
        )
    elif tls and ("invalidcontenttype" in lower or "corrupt message" in lower or "wrong version number" in lower):
        hint = (
            "TLS is on (TEMPORAL_TLS, a TEMPORAL_TLS_* setting or the profile's tls) but the server does "
            "not answer in TLS: set TEMPORAL_TLS=false for a server without it, such as start-dev"
        )
    elif closed and tls and not has_cert:
        hint = f"the server closed the connection during TLS setup; if it requires a client certificate, {client_cert}"
    elif closed and not tls:
        hint = "the server closed the connection; if it expects TLS, set TEMPORAL_TLS=true"
    else:
        return f"{cut(text, MAX_CONNECT_TEXT)}; is {config['target_host']} the server? If not, {address_hint}"
    return f"{hint} ({cut(text, MAX_CONNECT_TEXT)})"


@functools.cache
def core_runtime() -> Runtime:
    """The process's one SDK runtime. Its core's logs (gRPC retries while a server restarts, …)
    go to CORE_LOG: the process's own handlers, format and masking, which a CLI can quiet. By
    default they go to standard output in colour, where a CLI's output belongs, and where a pipe
    nobody reads would stop the core's threads, and with them every poll of the worker."""
    logging_config = LoggingConfig(filter=LoggingConfig.default.filter, forwarding=LogForwardingConfig(logger=CORE_LOG))
    return Runtime(telemetry=TelemetryConfig(logging=logging_config))


async def ensure_search_attributes(client: Client) -> list[str]:
    """Register the run's search attributes if the server lacks them; returns those added."""
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    missing = {
        name: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.upper()}")
        for name, kind in SEARCH_ATTRIBUTES.items()
        if name not in listed.custom_attributes
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
        )
    return sorted(missing)
