"""The one settings model (durable_agent_runner/config/env.py): every variable the product reads, bounded, and
a bad one refused at start in one line that names it, quotes it and says what is allowed."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable_agent_runner.config.env import ClientSettings, SettingsError, WorkerSettings
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.config.values import masked, queue_flag

ROOT = Path(__file__).resolve().parent.parent
OURS = ("LLM_", "OPENAI_", "TOOL_", "WORKER_", "PAYLOAD_", "AGENT_", "TEMPORAL_", "HOOKS_", "OTEL_")


def clean_env(**extra: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(OURS)} | extra


@pytest.mark.parametrize(
    "name, value, allowed",
    [
        ("LLM_TIMEOUT", "1e308", "a number of seconds in (0, 3600]"),
        ("LLM_READ_TIMEOUT", "3601", "a number of seconds in (0, 3600]"),
        ("LLM_RETRY_SECONDS", "nan", "a number of seconds in (0, 86400]"),
        ("LLM_MAX_ATTEMPTS", "1" * 23, "a whole number in [1, 100]"),
        ("LLM_MAX_ATTEMPTS", "101", "a whole number in [1, 100]"),
        ("TOOL_THREADS", "1e3", "a whole number in [1, 1024]"),
        ("LLM_TIMEOUT", "٣٠", "a number of seconds in (0, 3600]"),  # float() reads it as 30
        ("LLM_RETRY_SECONDS", "1_0", "a number of seconds in (0, 86400]"),  # and this as 10
        ("PAYLOAD_STORE_THRESHOLD", "-1", "a whole number of bytes in [0, 2.09715e+06]"),
        ("LLM_STREAM", "maybe", "1, true, yes or on, or 0, false, no or off"),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "sure", "1, true, yes or on, or 0, false, no or off"),
        ("WORKER_EVENT_LOOP", "trio", "one of uvloop or asyncio"),
        ("LLM_BASE_URL", "localhost:8000", "an http:// or https:// URL with a host, and no blanks"),
        ("LLM_BASE_URL", "http://gpu box:8000/v1", "an http:// or https:// URL with a host, and no blanks"),
        # a port no connection can use: said at the start, not at every run's first model call
        ("LLM_BASE_URL", "http://gpu:99999/v1", "a URL whose port, if it has one, is a number from 1 to 65535"),
        ("LLM_BASE_URL", "http://gpu:0/v1", "a URL whose port, if it has one, is a number from 1 to 65535"),
        ("AGENT_TASK_QUEUE", "ops\nq", "1-200 printable characters with no space at either end"),
        ("AGENT_TASK_QUEUE", " ", "1-200 printable characters with no space at either end"),
    ],
)
def test_a_bad_value_is_one_line_naming_it_and_what_is_allowed(name: str, value: str, allowed: str) -> None:
    with pytest.raises(SettingsError) as caught:
        WorkerSettings.load({name: value})
    shown = value if len(value) <= 40 else value[:40] + "…"
    assert str(caught.value) == f"{name} must be {allowed}, not {shown!r}"


def test_a_url_with_a_user_or_password_is_refused_without_showing_them() -> None:
    """A shown URL (the worker logs its model server's) holds no credentials, and the refusal
    itself does not quote them back; a secret URL (Slack's webhook) may hold them."""
    with pytest.raises(SettingsError) as caught:
        WorkerSettings.load({"LLM_BASE_URL": "https://ops:hunter2@llm.example.com/v1"})
    said = str(caught.value)
    assert said == (
        "LLM_BASE_URL must be a URL with no user or password in it (it is shown in logs): give the key in "
        "its own variable, not 'https://***@llm.example.com/v1'"
    )
    assert "hunter2" not in said and "ops" not in said
    long = "https://operations-team-account:hunter2-and-then-some@llm.example.com/v1"  # cut at 40 characters
    with pytest.raises(SettingsError) as caught:
        WorkerSettings.load({"LLM_BASE_URL": long})
    assert "hunter2" not in str(caught.value) and "https://***@llm.example.com" in str(caught.value)
    slack = "https://u:hunter2@hooks.slack.com/services/T/B/x"
    loaded = WorkerSettings.load({"NOTIFY_SLACK_WEBHOOK_URL": slack})
    assert loaded.notify_slack_webhook_url is not None
    assert loaded.notify_slack_webhook_url.get_secret_value() == slack


@given(
    st.text(alphabet=st.characters(blacklist_characters="/?#@", blacklist_categories=("Cs",)), max_size=30),
    st.text(alphabet=st.characters(blacklist_characters="/?#@", blacklist_categories=("Cs",)), min_size=1, max_size=30),
    st.sampled_from(["http", "https", "ftp"]),
)
def test_a_shown_url_keeps_no_user_or_password(user: str, password: str, scheme: str) -> None:
    """Whatever the user and password, a refusal shows neither: only `***@` and the rest."""
    url = f"{scheme}://{user}:{password}@llm.example.com/v1?q=1"
    assert masked(url) == f"{scheme}://***@llm.example.com/v1?q=1"


def test_llm_settings_made_in_code_take_the_variables_rules() -> None:
    """`LLMSettings(...)` (a plugin's, the test kit's) checks its URLs as LLM_BASE_URL is checked,
    refuses a misspelt setting instead of dropping it, and never quotes a refused key or URL back."""
    from pydantic import ValidationError

    from durable_agent_runner.config.llm import LLMSettings

    assert LLMSettings(base_url="http://gpu:8000/v1/").base_url == "http://gpu:8000/v1"
    for bad, said in (
        ({"base_url": "http://gpu:99999/v1"}, "a URL whose port, if it has one, is a number from 1 to 65535"),
        ({"anthropic_base_url": "https://ops:hunter2@a.example"}, "a URL with no user or password in it"),
        ({"api_key": "sk-hunter2 oops"}, "printable ASCII without blanks"),
        ({"modle": "gpt"}, "Extra inputs are not permitted"),
    ):
        with pytest.raises(ValidationError) as caught:
            LLMSettings(**bad)  # type: ignore[arg-type]
        assert said in str(caught.value) and "hunter2" not in str(caught.value), caught.value


def test_a_bad_secret_is_never_quoted_back() -> None:
    with pytest.raises(SettingsError) as caught:
        WorkerSettings.load({"CONSOLE_TOKEN": "hunter2-but-with-a-space in it"})
    assert str(caught.value) == (
        "CONSOLE_TOKEN must be 16-256 characters of letters, digits and -_.~, "
        "not the 30 characters it holds (not shown)"
    )


def test_values_in_range_and_defaults() -> None:
    s = WorkerSettings.load({"LLM_TIMEOUT": "3600", "LLM_MAX_ATTEMPTS": "100", "LLM_STREAM": "OFF", "TOOL_THREADS": ""})
    assert (s.llm_timeout, s.llm_max_attempts, s.llm_stream, s.tool_threads) == (3600.0, 100, False, 16)
    assert ClientSettings.load({}).task_queue == "agent-runner"
    assert LLMSettings.from_env({"OPENAI_API_KEY": "k"}).api_key is not None


def test_a_long_value_is_cut_when_quoted() -> None:
    with pytest.raises(SettingsError) as caught:
        WorkerSettings.load({"LLM_TIMEOUT": "9" * 5000})
    assert len(str(caught.value)) < 120 and "…" in str(caught.value)


def test_the_process_environment_is_read_by_pydantic_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_TIMEOUT", "1e308")
    with pytest.raises(SettingsError, match="LLM_TIMEOUT"):
        WorkerSettings.load()


def worker_start(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **env: str) -> tuple[int, str]:
    """worker.py's main in this process, with only `env` of the variables it reads: its exit code
    and what it wrote on standard error (a process of its own costs a second a case; one test per
    refusal runs it as one: test_a_worker_refusing_a_setting_is_a_process_with_one_line)."""
    for key in os.environ:
        if key.startswith(OURS):
            monkeypatch.delenv(key)
    for key, value in (env | {"TEMPORAL_ADDRESS": "127.0.0.1:1"}).items():
        monkeypatch.setenv(key, value)
    from durable_agent_runner.worker.main import main

    code = main([])
    return code, capsys.readouterr().err


def test_a_worker_refusing_a_setting_is_a_process_with_one_line() -> None:
    """The refusals below, as a person meets them: worker.py exits 2 with that one line, no traceback."""
    for name, value in (("LLM_TIMEOUT", "1e308"), ("LLM_API_KEY", "sk-caf\u00e9-1234567890")):
        env = clean_env(**{name: value, "TEMPORAL_ADDRESS": "127.0.0.1:1"})
        done = subprocess.run(
            [sys.executable, "worker.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"worker.py: error: {name} must be "), line
        assert value not in line or name != "LLM_API_KEY", line


@pytest.mark.parametrize(
    "name, value", [("LLM_TIMEOUT", "1e308"), ("LLM_MAX_ATTEMPTS", "12345678901234567890123"), ("TOOL_THREADS", "0")]
)
def test_the_worker_refuses_a_value_out_of_range_at_start(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: accepted at start, then every run failed its first workflow task (OverflowError)."""
    code, err = worker_start(monkeypatch, capsys, **{name: value})
    assert code == 2, err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"worker.py: error: {name} must be ") and line.endswith(f", not {value!r}"), line
    assert "]" in line, line  # the allowed range


def test_a_task_queue_flag_no_worker_could_poll_is_one_usage_line() -> None:
    """Before: `client.py --task-queue $'a\\nb' run hi` started a run no worker would take, and
    `--task-queue ''` went to the default queue unsaid. Both commands take the flag through one rule."""
    for queue in ("", "a\nb", " ops", "q" * 201):
        with pytest.raises(argparse.ArgumentTypeError, match="a task queue must be 1-200 printable characters"):
            queue_flag(queue)
    for command, queue in (("worker.py", ""), ("client.py", "a\nb")):
        args = [sys.executable, command, "--task-queue", queue] + (["list"] if command == "client.py" else [])
        env = clean_env(TEMPORAL_ADDRESS="127.0.0.1:1")
        done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip().splitlines()[-1] == (
            f"{command}: error: argument --task-queue: {queue!r}: a task queue must be 1-200 printable "
            "characters with no space at either end"
        )


def test_a_worker_whose_namespace_does_not_exist_stops_with_one_line(temporal_server) -> None:
    env = clean_env(TEMPORAL_ADDRESS=temporal_server.target, TEMPORAL_NAMESPACE="nope")
    done = subprocess.run([sys.executable, "worker.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "CancelledError" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "namespace 'nope' does not exist" in line and "TEMPORAL_NAMESPACE" in line


@pytest.mark.parametrize("key", ["sk-caf\u00e9-1234567890", "sk-1234567890\nsecond-line", "sk-12345 67890"])
def test_the_worker_refuses_an_api_key_no_header_can_carry_at_start(
    key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a non-ASCII key crashed the worker with a 25-line traceback at its first model call;
    a key with a line break failed every run at its first call."""
    code, err = worker_start(monkeypatch, capsys, LLM_API_KEY=key)
    assert code == 2, err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("worker.py: error: LLM_API_KEY must be printable ASCII"), line
    assert "not shown" in line
    for part in key.split():
        assert part not in line  # the key is never echoed, not even a piece of it


def test_an_api_key_given_in_code_is_checked_as_the_variable_is() -> None:
    with pytest.raises(ValueError, match="printable ASCII"):
        LLMSettings(api_key="sk-\u00e9")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="HTTP header name"):
        LLMSettings(api_key_header="api key")
    assert LLMSettings(api_key="sk-ok").auth_headers() == {"Authorization": "Bearer sk-ok"}  # type: ignore[arg-type]


def test_each_setting_is_parsed_once_with_one_bound() -> None:
    """Before: TOOL_THREADS and PAYLOAD_STORE_THRESHOLD were parsed again by their readers, with
    no upper bound (1025 threads, a 3 MB threshold past Temporal's 2 MB payload limit passed)."""
    from durable_agent_runner.agents.executor import size_from_env
    from durable_agent_runner.payloads.store import PayloadStoreError, external_storage

    with pytest.raises(SettingsError, match=r"TOOL_THREADS must be a whole number in \[1, 1024\]"):
        size_from_env({"TOOL_THREADS": "1025"})
    with pytest.raises(PayloadStoreError, match="PAYLOAD_STORE_THRESHOLD must be a whole number of bytes in"):
        external_storage({"PAYLOAD_STORE_THRESHOLD": "3000000"})
    assert size_from_env({"TOOL_THREADS": "1024"}) == 1024
    assert external_storage({"PAYLOAD_STORE_THRESHOLD": "2097152"}).payload_size_threshold == 2097152


def test_the_readers_that_bypassed_the_settings_now_read_through_them(tmp_path: Path) -> None:
    """HOOKS_STATE_DIR, PAYLOAD_CODEC_KEYS, LLM_PRICES, USER and NO_COLOR come from the settings."""
    from durable_agent_runner.activities.prices import PriceTable
    from durable_agent_runner.config.env import ShellSettings, login_name, no_color
    from durable_agent_runner.payloads.codec import keyring_from_env

    prices = tmp_path / "prices.json"
    prices.write_text('{"my-model": {"input": 1, "output": 2}}')
    assert PriceTable.from_env({"LLM_PRICES": str(prices)}).price("my-model") is not None
    assert keyring_from_env({}) is None
    assert ShellSettings.load({"USERNAME": "alice"}).user == "alice"
    assert ShellSettings.load({"USER": "x" * 500}).user == "x" * 200  # cut as `--by` is, never refused
    assert ShellSettings.load({"NO_COLOR": "0"}).no_color  # any value at all, as no-color.org says
    assert isinstance(login_name("cli"), str) and isinstance(no_color(), bool)


def test_the_worker_masks_keys_in_a_start_error_without_reading_the_environment_itself() -> None:
    from durable_agent_runner.config.env import secret_values

    env = {"LLM_API_KEY": "sk-a", "TEMPORAL_API_KEY": "tk-b", "LLM_MODEL": "m"}
    assert sorted(secret_values(env)) == ["sk-a", "tk-b"]


def test_settings_of_a_given_mapping_read_that_mapping_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `load(env)` filled the fields `env` left out from the process's own variables."""
    monkeypatch.setenv("PAYLOAD_STORE_DIR", "/from/the/process")
    assert ClientSettings.load({}).payload_store_dir is None
    assert ClientSettings.load().payload_store_dir == "/from/the/process"


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            {"TEMPORAL_ADDRESS": "http://localhost:7233"},  # the SDK warned, and will refuse it
            "TEMPORAL_ADDRESS must be the server's host:port, not a URL (no http:// or https://), "
            "not 'http://localhost:7233'",
        ),
        (  # every link the CLI and the console print would have begun ftp://
            {"TEMPORAL_UI_URL": "ftp://x"},
            "TEMPORAL_UI_URL must be an http:// or https:// URL with a host, and no blanks, not 'ftp://x'",
        ),
    ],
)
def test_temporal_s_address_and_the_web_ui_s_are_checked_where_the_client_reads_them(env, said) -> None:
    with pytest.raises(SettingsError) as caught:
        ClientSettings.load(env)
    assert str(caught.value) == said


def test_a_web_ui_url_loses_its_trailing_slash_so_links_have_one() -> None:
    ui = ClientSettings.load({"TEMPORAL_UI_URL": "http://ui.example.com:8080/"}).ui_url
    assert ui == "http://ui.example.com:8080"
    address = ClientSettings.load({"TEMPORAL_ADDRESS": "temporal.internal:7233"}).temporal_address
    assert address == "temporal.internal:7233"


def test_every_secret_setting_is_one_a_refusal_never_quotes() -> None:
    """A bad CODEC_TOKEN was quoted back whole (`not 'short'`) until it joined SECRETS."""
    from durable_agent_runner.config.env import SECRETS

    secret = [f.validation_alias for f in WorkerSettings.model_fields.values() if "SecretStr" in repr(f.annotation)]
    assert secret and all(isinstance(name, str) and name in SECRETS for name in secret), secret
    with pytest.raises(SettingsError) as caught:
        ClientSettings.load({"CODEC_TOKEN": "short"})
    assert "short" not in str(caught.value) and "(not shown)" in str(caught.value)
