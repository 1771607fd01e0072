"""The worker's transcript cache: used only when it matches the workflow's hash exactly."""

from durable_agent_runner.activities.context_cache import ContextCache
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

AGENT = t.AgentSpec(name="a", tools=[t.ToolSpec(name="f")])


def turn_one() -> tuple[RunState, t.AssistantMessage]:
    state = RunState()
    state.messages.append(t.UserMessage(content="hi"))
    reply = t.AssistantMessage(tool_calls=[t.ToolCall(call_id="c1", name="f"), t.ToolCall(call_id="c2", name="f")])
    return state, reply


def after_turn_one(cached: dict[str, str], workflow: dict[str, str]) -> tuple[ContextCache, RunState]:
    """This worker made turn 1's reply and ran the tools in `cached` (call id -> output); the
    workflow's transcript then holds the reply and the results in `workflow`, in call order."""
    state, reply = turn_one()
    cache = ContextCache()
    cache.remember("run", AGENT, list(state.messages), state.digest(), reply)
    for call_id, output in cached.items():
        cache.remember_tool("run", t.ToolResult(call_id=call_id, tool="f", output=output))
    state.messages += [reply, *(t.ToolMessage(call_id=c, name="f", content=o) for c, o in workflow.items())]
    return cache, state


def test_the_next_context_is_rebuilt_from_the_reply_and_the_tool_results():
    cache, state = after_turn_one({"c2": "two", "c1": "one"}, {"c1": "one", "c2": "two"})
    found = cache.lookup("run", len(state.messages), state.digest())
    assert found is not None and found[1] == state.messages and cache.hits == 1


def test_any_difference_from_the_workflow_falls_back_to_the_query():
    # the workflow's message differs (e.g. a person edited the arguments): the hash says so
    cache, state = after_turn_one({"c1": "one", "c2": "two"}, {"c1": "[edited] one", "c2": "two"})
    assert cache.lookup("run", len(state.messages), state.digest()) is None
    assert cache.lookup("other-run", len(state.messages), state.digest()) is None
    assert cache.lookup("run", len(state.messages), "") is None
    assert cache.misses == 3


def test_a_tool_result_from_another_worker_is_a_miss():
    cache, state = after_turn_one({"c1": "one"}, {"c1": "one", "c2": "two"})  # c2 ran elsewhere
    assert cache.lookup("run", len(state.messages), state.digest()) is None


def test_the_cache_holds_a_bounded_number_of_runs():
    cache = ContextCache(max_runs=2)
    state, reply = turn_one()
    for run in ("a", "b", "c"):
        cache.remember(run, AGENT, list(state.messages), state.digest(), reply)
    assert len(cache._runs) == 2 and "a" not in cache._runs


def test_a_seeded_start_answers_the_first_call_if_the_prompt_is_the_workflows():
    """The resolve on the run's own worker leaves the agent and the prompt: the first model call
    finds them, unless the workflow's first message is something else."""
    state = RunState()
    state.messages.append(t.UserMessage(content="hi"))
    cache = ContextCache()
    cache.seed("run", AGENT, [t.UserMessage(content="hi")])
    assert cache.lookup("run", 1, state.digest()) == (AGENT, state.messages)
    cache.seed("other", AGENT, [t.UserMessage(content="hello")])
    assert cache.lookup("other", 1, state.digest()) is None and cache.misses == 1
