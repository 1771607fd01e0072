"""fake_llm's memory scenarios over real HTTP: the `recall` model, which lists every user message
it sees, and the summary any model writes when asked to compact a session's transcript."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.testing.scenarios.basic import MAX_SUMMARY_CHARS

SUMMARIZE = "Summarize the conversation in the user message below."
TRANSCRIPT = "\n".join(
    [
        '<summary of="4">\nSummary of our conversation so far:\nSUMMARY: my name is Ada | my order is 4417\n</summary>',
        "<user>\nI live in Paris\n</user>",
        "<assistant>\nnoted\n</assistant>",
        '<tool_call name="get_weather" id="call_2_0">{"city": "Paris"}</tool_call>',
        '<tool_result name="get_weather" id="call_2_0">\n{"temperature_c": 15}\n</tool_result>',
        "<user>\nand a\nsecond line\n</user>",
    ]
)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def http(server: FakeLLMServer) -> Iterator[httpx.Client]:
    server.reset()
    with httpx.Client(base_url=server.url, timeout=5) as client:
        yield client


def text_of(http: httpx.Client, api: str, model: str, messages: list[dict[str, Any]], system: str = "") -> str:
    """The reply's text, asked over `api` with `system` as instructions."""
    if api == "chat":
        wire = [{"role": "system", "content": system}, *messages] if system else messages
        resp = http.post("/v1/chat/completions", json={"model": model, "messages": wire})
        assert resp.status_code == 200, resp.text
        [choice] = resp.json()["choices"]
        assert not choice["message"].get("tool_calls")
        return str(choice["message"]["content"])
    body: dict[str, Any] = {"model": model, "input": messages, **({"instructions": system} if system else {})}
    resp = http.post("/v1/responses", json=body)
    assert resp.status_code == 200, resp.text
    return "".join(p["text"] for item in resp.json()["output"] if item["type"] == "message" for p in item["content"])


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_recall_lists_every_user_message_it_sees_in_order(http: httpx.Client, api: str) -> None:
    messages = [
        user("SUMMARY: my name is Ada"),  # a summary in place of older messages is a user message too
        {"role": "assistant", "content": "I remember: SUMMARY: my name is Ada"},
        user("I live in Paris"),
        {"role": "assistant", "content": "ok"},
        user("where do I live?"),
    ]
    text = text_of(http, api, "recall", messages, system="You are helpful.")
    assert text == "I remember: SUMMARY: my name is Ada | I live in Paris | where do I live?"
    assert text_of(http, api, "recall", messages) == text  # a pure function of what it sees
    assert text_of(http, api, "recall", [{"role": "assistant", "content": "hi"}]) == "I remember nothing."


@pytest.mark.parametrize("model", ["recall", "demo", "echo", "script:nothing-registered", "loop:3"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_any_model_asked_to_summarize_lists_the_transcripts_user_messages(
    http: httpx.Client, api: str, model: str
) -> None:
    text = text_of(http, api, model, [user(TRANSCRIPT)], system=f"{SUMMARIZE}\n\nKeep names.")
    # An earlier summary's messages come first, without its prefix: summaries never nest.
    assert text == "SUMMARY: my name is Ada | my order is 4417 | I live in Paris | and a\nsecond line"


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_summary_request_is_recognised_by_its_instructions_only(http: httpx.Client, api: str) -> None:
    # The same words in a user message, or later in the instructions, are an ordinary request.
    assert text_of(http, api, "echo", [user(SUMMARIZE)]) == f"echo: {SUMMARIZE}"
    assert text_of(http, api, "echo", [user("hi")], system=f"Be brief. {SUMMARIZE}") == "echo: hi"


def test_a_summary_of_untagged_text_or_of_nothing(http: httpx.Client) -> None:
    # Untagged: the user messages as they are.
    assert text_of(http, "chat", "demo", [user("plain"), user("text")], system=SUMMARIZE) == "SUMMARY: plain | text"
    # No user message in the transcript: a blank reply, as a real model may send.
    tools_only = '<tool_result name="t" id="c">\n{}\n</tool_result>'
    assert text_of(http, "chat", "demo", [user(tools_only)], system=SUMMARIZE) == ""


def test_a_summary_is_bounded(http: httpx.Client) -> None:
    big = "\n".join(f"<user>\n{n}{'x' * 100_000}\n</user>" for n in range(4))
    text = text_of(http, "chat", "demo", [user(big)], system=SUMMARIZE)
    assert len(text) == MAX_SUMMARY_CHARS and text.startswith("SUMMARY: 0xxx")
