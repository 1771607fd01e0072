"""The eval's scoring activity (`eval.score`, workflows/eval_run.py): every evaluator of one
finished case, in the worker, where custom evaluators are registered. An LLM judge's model call
goes through the model activity's own `send` (as a guardrail's `ask_model` does): the same
endpoints, bounds, masking and prices, streamed as the worker streams; its usage is returned so
the eval counts it. An evaluator that raises, or a judge whose call fails for good, is that
score's error with the reason, never the eval's failure.
"""

from __future__ import annotations

import asyncio
import json
import time

from pydantic import BaseModel, ConfigDict
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from durable_agent_runner.activities.model import (
    BEAT_WITH,
    ModelActivities,
    beat,
    build_request,
    endpoint_for,
    heartbeating,
)
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.evals.context import EvaluationResult, ToolCallFact, one_line
from durable_agent_runner.evals.judge import JudgeRequest, LLMJudge, judge_request
from durable_agent_runner.evals.registry import EvaluatorSpec, EvaluatorSpecError, build
from durable_agent_runner.machine import eval_plan as plan
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te

# The last attempt of a judge's retryable failure gives an errored score instead (the workflow's SCORE_RETRY).
LAST_ATTEMPT = 5
KEPT_REPLIES = 256 * 1024  # characters of judges' replies an attempt hands to the next (heartbeat details)


class Judged(BaseModel):
    """The judges' replies an attempt got, by evaluator index, and what they cost."""

    model_config = ConfigDict(extra="forbid")
    replies: dict[int, str] = {}
    usage: t.Usage = t.Usage()


def _judged_before() -> Judged:
    """What an earlier attempt of this scoring got from its judges: its heartbeat's last detail
    (a model call's own progress comes first, activities/model.py `beat`)."""
    details = activity.info().heartbeat_details
    if len(details) < 2:
        return Judged()
    try:
        return Judged.model_validate(details[-1])
    except ValueError:
        return Judged()


class EvalActivities:
    """The scoring activity, bound to the worker's Temporal client (a case's tool calls, read by
    query when an evaluator needs them), settings and model activities (the judge's calls)."""

    def __init__(self, client: Client | None, settings: LLMSettings, model: ModelActivities | None) -> None:
        self.client = client
        self.settings = settings
        self.model = model

    @activity.defn(name=te.EVAL_SCORE_ACTIVITY)
    async def score(self, input: te.ScoreInput) -> te.Scored:
        async with heartbeating():
            ctx = plan.score_context(input, await self._tool_calls(input))
            case = input.case
            specs = [*input.evaluators, *case.evaluators]
            judged = _judged_before()  # an earlier attempt's replies: those judges are not asked again
            replies, usage = dict(judged.replies), judged.usage
            errors: dict[int, str] = {}
            token = BEAT_WITH.set((judged.model_dump(mode="json"),))
            try:
                for i, spec in enumerate(specs):
                    judge = _judge(spec)
                    if judge is None or i in replies:
                        continue
                    try:
                        reply, used = await self._ask(judge_request(judge, ctx), input.judge_model)
                    except ApplicationError as err:
                        if not err.non_retryable and activity.info().attempt < LAST_ATTEMPT:
                            raise  # a rate limit, a server error: Temporal retries the scoring
                        errors[i] = one_line(f"judge model call failed: {err.message}", 500)
                        continue
                    replies[i], usage = reply, usage + used
                    # Every beat from now carries the replies so far (the SDK sends a failed
                    # attempt's last one): a retry asks only the judges that have not answered.
                    if sum(len(r) for r in replies.values()) <= KEPT_REPLIES:
                        BEAT_WITH.set((Judged(replies=replies, usage=usage).model_dump(mode="json"),))
                        beat()
            finally:
                BEAT_WITH.reset(token)
            # Off the event loop: a custom evaluator is a plain function, and a slow one (a file, a
            # request) must hold neither the worker's other runs nor this activity's heartbeats.
            scores = await asyncio.to_thread(plan.scores, input, ctx, replies)
            scores = _with_errors(specs, scores, errors)
        return te.Scored(scores=scores, usage=usage)

    async def _ask(self, request: JudgeRequest, default_model: str | None) -> tuple[str, t.Usage]:
        """One judge call: no tools, streamed as the worker streams, through `send`."""
        if self.model is None:
            raise ApplicationError("this worker has no model activities to ask a judge with", non_retryable=True)
        s = self.settings
        try:  # the judge's own settings (temperature, ...), checked as an agent's are
            settings = t.ModelSettings.model_validate(request.model_settings or {})
        except ValueError as err:
            raise ApplicationError(f"model_settings: {one_line(str(err), 300)}", non_retryable=True) from None
        spec = t.AgentSpec(
            name="judge", instructions=request.system, api=s.api, model_timeout_seconds=s.timeout, settings=settings
        )
        endpoint = endpoint_for(self.model.providers, request.model or default_model or s.model, spec)
        body = build_request(endpoint, spec, [t.UserMessage(content=request.user)], s.stream)
        reply, _ = await self.model.send(spec, endpoint, body, s.stream, turn=0, began=time.monotonic())
        return reply.message.content or "", reply.usage

    async def _tool_calls(self, input: te.ScoreInput) -> list[ToolCallFact]:
        """The case run's tool calls, read from its transcript, only when an evaluator looks at them."""
        specs = [*input.evaluators, *input.case.evaluators]
        if self.client is None or not any(s.name == "CalledTool" for s in specs):
            return []
        handle = self.client.get_workflow_handle(input.run_id)
        transcript = await handle.query(t.TRANSCRIPT_QUERY, t.TranscriptQuery(), result_type=t.Transcript)
        facts = []
        for message in transcript.messages:
            for call in getattr(message, "tool_calls", None) or []:
                try:
                    arguments = json.loads(call.arguments) if call.arguments else {}
                except ValueError:
                    arguments = {}
                facts.append(ToolCallFact(name=call.name, arguments=arguments if isinstance(arguments, dict) else {}))
        return facts


def _judge(spec: EvaluatorSpec) -> LLMJudge | None:
    try:
        evaluator = build(spec)
    except EvaluatorSpecError:
        return None  # evaluate_case reports it
    return evaluator if isinstance(evaluator, LLMJudge) else None


def _with_errors(
    specs: list[EvaluatorSpec], scores: list[EvaluationResult], errors: dict[int, str]
) -> list[EvaluationResult]:
    """The scores with each judge whose call failed for good shown errored with why (evaluate_case
    reports a judge without a reply as not run)."""
    if not errors:
        return scores
    labels = {specs[i].label(): why for i, why in errors.items()}
    return [EvaluationResult(name=r.name, error=labels[r.name]) if r.name in labels and r.error else r for r in scores]
