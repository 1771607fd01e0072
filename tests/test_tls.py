"""Temporal behind TLS, as on Temporal Cloud or a TLS-fronted cluster: the session's dev server
behind a TLS-terminating proxy (tests/tls_proxy.py) with certificates made here, reached by
worker.py and client.py in their own processes, configured only as the `temporal` CLI is:
TEMPORAL_* variables or a profile file (durable_agent_runner/config/connection.py, through temporalio.envconfig)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from durable_agent_runner.config.connection import (
    ConnectionConfigError,
    address,
    connect_config,
    connect_error,
    namespace,
)
from durable_agent_runner.config.env import ClientSettings, SettingsError
from tests.tls_proxy import Pki, TLSProxy, make_pki

ROOT = Path(__file__).resolve().parent.parent
# Connection settings the test's own environment might hold: each process here gets only its own.
CLEARED = ("TEMPORAL_", "PAYLOAD_CODEC_KEYS")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def tls_proxy(temporal_server, pki: Pki) -> Iterator[TLSProxy]:
    with TLSProxy(temporal_server.target, pki.server_cert, pki.server_key) as proxy:
        yield proxy


@pytest.fixture
def mtls_proxy(temporal_server, pki: Pki) -> Iterator[TLSProxy]:
    with TLSProxy(temporal_server.target, pki.server_cert, pki.server_key, client_ca=pki.ca_cert) as proxy:
        yield proxy


def base_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    # No profile file of the developer's: only what the test says.
    return {**env, "TEMPORAL_CONFIG_FILE": os.devnull, "PYTHONUNBUFFERED": "1", **settings}


def start_worker(env: dict[str, str], log: Path, task_queue: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "worker.py", "--tools", "examples.demo_agent", "--task-queue", task_queue]
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while b"worker polling" not in log.read_bytes():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"worker did not start:\n{log.read_text()}"
        time.sleep(0.1)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def client_py(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "client.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def a_run_completes(env: dict[str, str], tmp_path: Path, task_queue: str) -> None:
    worker = start_worker(env, tmp_path / "worker.log", task_queue)
    try:
        done = client_py(env, "run", "--wait", "What's the weather in Tokyo?")
        assert done.returncode == 0, (done, (tmp_path / "worker.log").read_text())
        assert "sunny" in done.stdout
    finally:
        stop(worker)


async def test_server_tls_worker_and_client_trust_the_ca_and_a_run_completes(
    tls_proxy: TLSProxy, pki: Pki, llm, task_queue, tmp_path: Path
):
    env = base_env(
        TEMPORAL_ADDRESS=tls_proxy.target,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(pki.ca_cert),
        LLM_BASE_URL=llm.base_url,
        AGENT_TASK_QUEUE=task_queue,
    )
    a_run_completes(env, tmp_path, task_queue)

    untrusting_env = {k: v for k, v in env.items() if k != "TEMPORAL_TLS_SERVER_CA_CERT_PATH"}
    untrusting = client_py({**untrusting_env, "TEMPORAL_TLS": "true"}, "list")
    assert untrusting.returncode == 1
    line = one_line(untrusting)
    assert f"cannot reach Temporal at {tls_proxy.target}" in line and "not trusted" in line, line

    plain = client_py(base_env(TEMPORAL_ADDRESS=tls_proxy.target), "list", timeout=90)  # TLS off: no answer
    assert plain.returncode == 1
    line = one_line(plain)
    assert f"cannot reach Temporal at {tls_proxy.target}" in line and "TEMPORAL_TLS=true" in line, line


async def test_mtls_worker_and_client_with_a_certificate_complete_a_run(
    mtls_proxy: TLSProxy, pki: Pki, llm, task_queue, tmp_path: Path
):
    env = base_env(
        TEMPORAL_ADDRESS=mtls_proxy.target,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(pki.ca_cert),
        TEMPORAL_TLS_CLIENT_CERT_PATH=str(pki.client_cert),
        TEMPORAL_TLS_CLIENT_KEY_PATH=str(pki.client_key),
        LLM_BASE_URL=llm.base_url,
        AGENT_TASK_QUEUE=task_queue,
    )
    a_run_completes(env, tmp_path, task_queue)


async def test_mtls_refuses_a_client_without_a_certificate_in_one_line(mtls_proxy: TLSProxy, pki: Pki):
    env = base_env(TEMPORAL_ADDRESS=mtls_proxy.target, TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(pki.ca_cert))
    done = client_py(env, "list")
    assert done.returncode == 1, done
    line = one_line(done)
    assert f"cannot reach Temporal at {mtls_proxy.target}" in line
    # The alert ("certificate required") or, when the core loses it, the closed connection: both say what to set.
    assert "client certificate" in line and "TEMPORAL_TLS_CLIENT_CERT_PATH" in line, line


async def test_a_profile_file_sets_the_connection_as_the_temporal_cli_reads_it(
    tls_proxy: TLSProxy, pki: Pki, llm, task_queue, tmp_path: Path
):
    profile = tmp_path / "temporal.toml"
    profile.write_text(
        f'[profile.staging]\naddress = "{tls_proxy.target}"\nnamespace = "default"\n'
        f'[profile.staging.tls]\nserver_ca_cert_path = "{pki.ca_cert}"\n'
    )
    env = base_env(TEMPORAL_CONFIG_FILE=str(profile), TEMPORAL_PROFILE="staging", LLM_BASE_URL=llm.base_url)
    env["AGENT_TASK_QUEUE"] = task_queue
    a_run_completes(env, tmp_path, task_queue)


# ------------------------------------------------------------------------- settings, no server


def test_envconfig_reads_the_temporal_variables():
    config = connect_config(
        {"TEMPORAL_ADDRESS": "ns.acct.tmprl.cloud:7233", "TEMPORAL_NAMESPACE": "ns.acct", "TEMPORAL_API_KEY": "key"}
    )
    assert config["target_host"] == "ns.acct.tmprl.cloud:7233" and config["namespace"] == "ns.acct"
    assert config["api_key"] == "key" and config["tls"] is True  # an API key turns TLS on
    assert connect_config({}) == {"target_host": "localhost:7233", "namespace": "default"}


def test_address_and_namespace_still_follow_the_old_variables(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("TEMPORAL_ADDRESS", "temporal.internal:7233")
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "agents")
    assert (address(), namespace()) == ("temporal.internal:7233", "agents")


# The core's words for a connection an mTLS server dropped because no client certificate came.
DROPPED = [
    "Failed client connect: `get_system_info` call error after connection: Status { code: Unavailable, "
    'message: "error trying to connect: peer closed connection without sending TLS close_notify" }',
    "Failed client connect: Server connection error: tonic::transport::Error(Transport, ConnectionReset)",
    "Failed client connect: `get_system_info` call error after connection: Status { code: Cancelled, message: "
    '"operation was canceled", source: Some(tonic::transport::Error(Transport, hyper::Error(Canceled, '
    '"connection was not ready"))) }',
]


@pytest.mark.parametrize("said", DROPPED)
def test_a_connection_dropped_during_tls_setup_says_to_set_a_client_certificate(said: str):
    tls = TLSConfig(server_root_ca_cert=b"ca")
    line = connect_error(RuntimeError(said), {"target_host": "t:7233", "namespace": "default", "tls": tls})
    assert "if it requires a client certificate" in line and "TEMPORAL_TLS_CLIENT_CERT_PATH" in line, line
    plain = connect_error(RuntimeError(said), {"target_host": "t:7233", "namespace": "default"})
    assert "if it expects TLS, set TEMPORAL_TLS=true" in plain, plain


def test_bad_connection_settings_are_one_line(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[profile.default\naddress = 1\n")
    with pytest.raises(ConnectionConfigError) as err:
        connect_config({"TEMPORAL_CONFIG_FILE": str(bad)})
    assert "\n" not in str(err.value) and "TOML" in str(err.value)
    with pytest.raises(ConnectionConfigError, match=r"cannot read .*missing\.pem: No such file"):
        connect_config({"TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(tmp_path / "missing.pem")})
    with pytest.raises(ConnectionConfigError, match="Profile 'nope' not found"):
        connect_config({"TEMPORAL_PROFILE": "nope", "TEMPORAL_CONFIG_FILE": os.devnull})


def test_client_py_and_worker_py_report_a_missing_certificate_in_one_line(tmp_path: Path):
    env = base_env(TEMPORAL_TLS_CLIENT_CERT_PATH=str(tmp_path / "client.pem"), TEMPORAL_TLS_CLIENT_KEY_PATH="x")
    for command in (["client.py", "list"], ["worker.py"]):
        done = subprocess.run([sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done
        assert "client.pem: No such file or directory" in one_line(done)


def test_tls_asked_of_a_plaintext_server_says_to_turn_it_off(temporal_server):
    """Before: the core's `InvalidContentType` transport error, and a hint to check the address."""
    env = base_env(TEMPORAL_ADDRESS=temporal_server.target, TEMPORAL_TLS="true")
    done = subprocess.run(
        [sys.executable, "client.py", "list"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done
    line = one_line(done)
    assert "TLS is on" in line and "set TEMPORAL_TLS=false" in line, line


def test_a_tls_switch_temporalio_would_read_as_on_is_refused_in_one_line():
    """temporalio's envconfig reads any word but true/false/1/0 as TLS on: `TEMPORAL_TLS=off`
    turned TLS on. Both commands refuse it before they connect."""
    for word in ("off", "no", "yes", "enabled"):
        with pytest.raises(SettingsError, match=f"TEMPORAL_TLS must be true or false .*, not {word!r}"):
            ClientSettings.load({"TEMPORAL_TLS": word})
    for command, word in ((["client.py", "list"], "off"), (["worker.py"], "no")):
        env = base_env(TEMPORAL_ADDRESS="127.0.0.1:1", TEMPORAL_TLS=word)
        done = subprocess.run([sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done
        assert one_line(done).endswith(
            f"error: TEMPORAL_TLS must be true or false (or 1 or 0), the words temporalio reads, not {word!r}"
        )
    assert connect_config({"TEMPORAL_TLS": "FALSE"})["tls"] is False  # any case, as temporalio reads it
