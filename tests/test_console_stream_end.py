"""A run page's live stream ends on the run's last view: when reading that view fails (a loaded
worker answers a closed run's query late), it is read again, a poll apart, before the stream says
`end`; the page never stops on a stale "running". A view read without its story (a worker answers
the status, but the story's query times out) is shown, and read again for the story. Without a
server: the client and the reads are stand-ins."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from durable_agent_runner.client.follow import Closed
from durable_agent_runner.console import data, sse, views_run

pytestmark = pytest.mark.pure


class OneRun:
    """A client whose run has just closed: its follower says so at once."""

    def get(self, run_id: str) -> Any:
        async def follow(since: int) -> AsyncIterator[Any]:
            yield Closed(status="completed")

        return SimpleNamespace(follow=follow)


async def frames(monkeypatch: pytest.MonkeyPatch, failures: int, storyless: int = 0) -> list[str]:
    reads = {"n": 0}

    async def run_view(client: Any, run_id: str) -> Any:
        reads["n"] += 1
        if reads["n"] <= failures:
            raise TimeoutError("the query timed out")
        live = reads["n"] > failures + storyless  # before: the story's read timed out
        return SimpleNamespace(waiting=[], status={"status": "completed"}, live=live)

    async def no_status(client: Any, run_id: str) -> Any:
        if storyless:  # a worker answers the status query
            return SimpleNamespace(status="completed", phase="completed", turn=1, paused=False, session=None)
        return None

    async def closed(client: Any, run_id: str) -> bool:
        return False

    monkeypatch.setattr(sse, "POLL", 0.01)
    monkeypatch.setattr(data, "run_view", run_view)
    monkeypatch.setattr(data, "_status", no_status)
    monkeypatch.setattr(data, "run_is_live", closed)
    monkeypatch.setattr(views_run, "facts", lambda view: f"<p id=status>{view.status['status']}</p>")
    monkeypatch.setattr(views_run, "story", lambda view: "the answer" if view.live else "")
    monkeypatch.setattr(views_run, "controls", lambda view: "")
    return [piece async for piece in sse.run_stream(OneRun(), "run-1", 0)]  # type: ignore[arg-type]


async def test_the_last_view_is_read_again_when_its_read_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    said = await frames(monkeypatch, failures=3)
    facts = [f for f in said if f.startswith("event: section") and '"facts"' in f]
    assert facts and "completed" in facts[-1], said
    assert said[-1].startswith("event: end") and said.index(facts[-1]) < len(said) - 1


async def test_a_last_view_never_read_still_ends_the_stream_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    said = await frames(monkeypatch, failures=1000)
    assert said[-1].startswith("event: end")
    assert not any('"facts"' in f for f in said)  # nothing to show: the page keeps what it had


async def test_a_last_view_read_without_its_story_is_read_again_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    said = await frames(monkeypatch, failures=0, storyless=2)
    stories = [f for f in said if f.startswith("event: section") and '"story"' in f]
    assert len(stories) == 3 and "the answer" not in stories[0], said  # shown at once, then again
    assert "the answer" in stories[-1] and said[-1].startswith("event: end")


async def test_a_story_never_read_still_ends_the_stream_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    said = await frames(monkeypatch, failures=0, storyless=1000)
    assert said[-1].startswith("event: end")
    stories = [f for f in said if f.startswith("event: section") and '"story"' in f]
    assert len(stories) == 1 + sse.FINAL_VIEW_TRIES and not any("the answer" in f for f in stories)
