"""`ask_person`: a question the model puts to a person, its options, the update that answers it,
and what status shows of it (machine/questions.py keeps the run's book of them).

Pure data, safe inside the workflow sandbox. A field added after a release carries a default, so
histories recorded by older code still decode and replay."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, model_validator

from durable_agent_runner.workflows.types.transcript import Contract

MAX_QUESTION_CHARS = 4000
MAX_CHOICES = 20
MAX_ANSWER_CHARS = 4000
# How long a question waits when its tool sets no timeout: as a call in doubt, then the default.
DEFAULT_ASK_SECONDS = 30 * 24 * 3600.0


class AskSpec(Contract):
    """How an `ask_person` call waits (`ask_person.with_options(...)`): at most `timeout_seconds`,
    then the model reads `default` (None: it is told nobody answered)."""

    timeout_seconds: float = Field(default=DEFAULT_ASK_SECONDS, gt=0, le=DEFAULT_ASK_SECONDS)
    default: str | None = Field(default=None, max_length=MAX_ANSWER_CHARS)


class PendingQuestion(Contract):
    """A question waiting for a person's answer, as status and the console show it."""

    call_id: str
    question: str
    choices: list[str] | None = None  # None: a free text answer
    since: datetime
    turn: int
    deadline: datetime | None = None  # then the default is given


class AnswerQuestion(Contract):
    """The body of the `answer_question` update: a person's answer to a pending question.
    {"call_id": "call_1_0", "text": "next Tuesday", "by": "alice"}
    {"call_id": "call_1_0", "choice": 2, "by": "alice"}   (1-based, one of its choices)"""

    call_id: str = Field(max_length=200)
    text: str | None = Field(default=None, max_length=MAX_ANSWER_CHARS)
    choice: int | None = Field(default=None, ge=1, le=MAX_CHOICES)
    by: str = Field(default="someone", max_length=200)

    @model_validator(mode="after")
    def _one(self) -> AnswerQuestion:
        if (self.text is None) == (self.choice is None):
            raise ValueError("give the answer as text or as a choice number, one of them")
        return self


class AnswerReceipt(Contract):
    call_id: str
    answer: str
    choice: int | None = None
    by: str
    recorded_at: datetime
