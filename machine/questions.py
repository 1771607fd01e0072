"""`ask_person` questions for one run: what the model asked, the questions waiting for a person,
and every answer given (by a person, or the default when nobody answered in time).

    parse(args)              → (question, choices), or what the model is told is wrong with them
    Questions.check(answer)  → raises DecisionRefused unless the answer applies now (the validator)
    Questions.apply(answer)  → the AnswerRecord (the handler, once checked)
    timeout_record(…)        → the run's own answer when nobody answered in time (the machine's)
    for_model(record)        → the tool's result as the model reads it

Pure state, no Temporal calls: the workflow passes the time in.
"""

from __future__ import annotations

from datetime import datetime

from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.machine.texts import excerpt
from durable_agent_runner.workflows.types import ANSWER_UPDATE, AnswerQuestion, AnswerRecord, AskSpec, PendingQuestion
from durable_agent_runner.workflows.types.questions import MAX_CHOICES, MAX_QUESTION_CHARS

ASK_PERSON = "ask_person"  # the built-in tool's name (durable_agent_runner/agents/ask.py)
MAX_CHOICE_CHARS = 500


def parse(args: dict[str, object] | None) -> tuple[str, list[str] | None] | str:
    """The model's arguments (`ToolCall.args`, parsed once) as (question, choices); or, as text for
    the model, why not."""
    if args is None:
        return f"error: {ASK_PERSON} takes a JSON object: {{'question': '…', 'choices': ['…', …] (optional)}}"
    question, choices = args.get("question"), args.get("choices")
    if not isinstance(question, str) or not question.strip() or len(question) > MAX_QUESTION_CHARS:
        return f"error: {ASK_PERSON} needs a non-empty 'question' of at most {MAX_QUESTION_CHARS} characters"
    if choices is None:
        return question.strip(), None
    if (
        not isinstance(choices, list)
        or not 1 <= len(choices) <= MAX_CHOICES
        or not all(isinstance(c, str) and c.strip() and len(c) <= MAX_CHOICE_CHARS for c in choices)
    ):
        return (
            f"error: {ASK_PERSON}'s 'choices' must be a list of 1 to {MAX_CHOICES} non-empty texts "
            f"of at most {MAX_CHOICE_CHARS} characters, or left out for a free answer"
        )
    return question.strip(), [str(c).strip() for c in choices]


class Questions:
    def __init__(self) -> None:
        self.pending: dict[str, PendingQuestion] = {}
        self.answers: list[AnswerRecord] = []

    def ask(self, question: PendingQuestion) -> None:
        self.pending[question.call_id] = question

    def answered(self, call_id: str) -> AnswerRecord | None:
        return next((a for a in self.answers if a.call_id == call_id), None)

    def check(self, answer: AnswerQuestion) -> None:
        """Raise DecisionRefused unless `answer` can be recorded now: the validator's, before anything is."""
        self._choice(answer)

    def _choice(self, answer: AnswerQuestion) -> tuple[str, int | None]:
        """The answer's text and choice number, as recorded; DecisionRefused when it cannot be."""
        if done := self.answered(answer.call_id):
            raise DecisionRefused(
                "NotPending", f"call {answer.call_id} was already answered by {done.by} at {done.at:%Y-%m-%d %H:%M:%S}"
            )
        waiting = self.pending.get(answer.call_id)
        if waiting is None:
            ids = ", ".join(self.pending) or "none"
            raise DecisionRefused("UnknownCall", f"no question waits with call {answer.call_id}; waiting: {ids}")
        choices = waiting.choices
        if answer.choice is not None:
            if choices is None:
                raise DecisionRefused("InvalidAnswer", f"call {answer.call_id} has no choices: answer with text")
            if answer.choice > len(choices):
                raise DecisionRefused(
                    "InvalidAnswer", f"choice {answer.choice} is not one of 1..{len(choices)} for call {answer.call_id}"
                )
            return choices[answer.choice - 1], answer.choice
        text = (answer.text or "").strip()
        if not text:
            raise DecisionRefused("InvalidAnswer", f"an answer to call {answer.call_id} may not be empty")
        if choices is None:
            return text, None
        match = next((n for n, c in enumerate(choices, 1) if c.casefold() == text.casefold()), None)
        if match is None:
            raise DecisionRefused(
                "InvalidAnswer",
                f"{text!r} is not one of the choices of call {answer.call_id}: give a choice number 1..{len(choices)}",
            )
        return choices[match - 1], match

    def apply(self, answer: AnswerQuestion, now: datetime) -> AnswerRecord:
        text, choice = self._choice(answer)
        waiting = self.pending.pop(answer.call_id)
        record = AnswerRecord(
            call_id=answer.call_id, question=waiting.question, answer=text, choice=choice, by=answer.by, at=now
        )
        return self._record(record)

    def settle(self, record: AnswerRecord) -> AnswerRecord:
        """Records an answer the run made itself (its default, on timeout)."""
        self.pending.pop(record.call_id, None)
        return self._record(record)

    def _record(self, record: AnswerRecord) -> AnswerRecord:
        self.answers.append(record)
        return record

    def abandon(self) -> None:
        """The run ended (failed, cancelled): nothing is waiting any more."""
        self.pending.clear()


def timeout_record(call_id: str, question: str, spec: AskSpec, now: datetime) -> AnswerRecord:
    """Nobody answered within the tool's timeout: the run answers with its default, or says so."""
    after = f"no answer within {spec.timeout_seconds:g}s"
    text = f"{after}; the default applies: {spec.default}" if spec.default is not None else f"{after}: nobody answered"
    return AnswerRecord(call_id=call_id, question=question, answer=text, by="timeout", at=now, automatic=True)


def for_model(record: AnswerRecord) -> str:
    """The tool's result as the model reads it: the answer's text, with its number for a choice."""
    if record.automatic:
        return record.answer
    return f"{record.answer} (choice {record.choice})" if record.choice is not None else record.answer


def answer_words(record: AnswerRecord) -> str:
    """One line for events and status: what was answered, by whom."""
    if record.automatic:
        return record.answer
    choice = f"choice {record.choice}: " if record.choice is not None else ""
    return f"{choice}{excerpt(record.answer, 200)} (by {record.by})"


def waiting_words(question: PendingQuestion) -> str:
    return f"waiting for an answer to: {excerpt(question.question, 200)}"


def details(pending: dict[str, PendingQuestion]) -> list[str]:
    """The questions waiting, for the Web UI's current details, with how to answer each."""
    lines: list[str] = []
    for q in pending.values():
        lines += ["", f"**Waiting for an answer** ({q.call_id}): {excerpt(q.question, 500)}"]
        lines += [f"{n}. {c}" for n, c in enumerate(q.choices or [], 1)]
        how = '"choice": 1' if q.choices else '"text": "…"'
        lines.append(
            f"Answer: `python client.py answer RUN_ID {q.call_id} {'--choice N' if q.choices else 'TEXT'}`, "
            f'or Send an Update → `{ANSWER_UPDATE}` with `{{"call_id": "{q.call_id}", {how}, "by": "you"}}`'
        )
    return lines
