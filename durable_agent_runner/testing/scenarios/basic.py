"""Scenarios that read the request alone, whatever the agent: echo, recall, loop, and the summary
any model writes when asked to compact a session's transcript. Each is a pure function of the
parsed request (a retried request gets the same answer).

  echo          "echo: <last user message>"
  loop:<N>:<B>  N-1 turns of B filler characters plus a call to the first tool, then text
  recall        "I remember: <user message 1> | <user message 2> | ...": every user message it
                sees, in order (a summary put in place of older messages is one of them)

Whatever the model, a request whose instructions start with "Summarize the conversation" (a
session's compaction, activities/compaction.py) gets "SUMMARY: <user message> | ...": the
user messages of the transcript it was sent, read from its <user> and <summary> tags (from an
earlier summary, what follows its "SUMMARY: "), or a blank reply when there are none.
"""

from __future__ import annotations

import json
import re

from durable_agent_runner.testing.fake_llm.conversation import Conversation
from durable_agent_runner.testing.fake_llm.scripts import Answer, no_model

SUMMARY_MARKER = "Summarize the conversation"  # as activities/compaction.py starts its instructions
SUMMARY_PREFIX = "SUMMARY: "
MAX_RECALL_CHARS = 64 * 1024
# Past the compaction activity's own cap (64 KB), so a test can see that cap at work.
MAX_SUMMARY_CHARS = 256 * 1024
_TAGGED = re.compile(r"<(user|summary)(?: of=\"\d+\")?>\n(.*?)\n</\1>", re.DOTALL)
_ANY_TAG = re.compile(r"^<(user|summary|assistant|tool_call|tool_result)\b", re.MULTILINE)
_FILLER = "lorem ipsum dolor sit amet, consectetur adipiscing elit. "


def echo(conv: Conversation) -> Answer:
    return f"echo: {conv.last_user_text}", []


def loop(conv: Conversation) -> Answer:
    match = re.fullmatch(r"loop:(\d+)(?::(\d+))?", conv.model)
    if not match or int(match.group(1)) < 1:
        raise no_model(conv.model, " Expected loop:<turns>:<bytes>, turns >= 1.")
    turns, size = int(match.group(1)), int(match.group(2) or 0)
    k = conv.turn
    if k >= turns - 1:
        return f"done after {turns} turns", []
    head = f"turn {k}: "
    filler = (head + _FILLER * (size // len(_FILLER) + 1))[:size]
    calls = [(conv.tool_names[0], json.dumps({"i": k, "size": size}))] if conv.tool_names else []
    return (filler if size or not calls else None), calls


def recall(conv: Conversation) -> Answer:
    if not conv.user_texts:
        return "I remember nothing.", []
    return ("I remember: " + " | ".join(conv.user_texts))[:MAX_RECALL_CHARS], []


def is_summary_request(conv: Conversation) -> bool:
    return conv.instructions.lstrip().startswith(SUMMARY_MARKER)


def summarize(conv: Conversation) -> Answer:
    """The user messages in the transcript sent to be summarized; "" when there are none."""
    texts: list[str] = []
    for sent in conv.user_texts:
        tagged = _TAGGED.findall(sent)
        if not _ANY_TAG.search(sent):  # not a transcript in compaction's tags: the message as it is
            texts.append(sent)
        texts += [_unwrapped(text) if tag == "summary" else text for tag, text in tagged]
    texts = [text for text in texts if text.strip()]
    return ((SUMMARY_PREFIX + " | ".join(texts))[:MAX_SUMMARY_CHARS] if texts else ""), []


def _unwrapped(summary: str) -> str:
    """An earlier summary's messages: what follows its "SUMMARY: ", wherever the runner put it."""
    return summary.split(SUMMARY_PREFIX, 1)[1] if SUMMARY_PREFIX in summary else summary
