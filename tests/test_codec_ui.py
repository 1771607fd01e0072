"""The Web UI of the dev server, in headless Chromium, on a run whose payloads are encrypted:
with `--ui-codec-endpoint` pointing at the codec server it shows the decrypted tool result;
restarted without it, the same page shows only ciphertext.

Needs the `playwright` package (a dev dependency) and a Chromium: Debian's (`apt-get install
chromium`), or $CHROMIUM, or one `playwright install chromium` fetched. Skips, saying which is
missing, without them."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from durable_agent_runner.cli.codec_server import CodecServer
from durable_agent_runner.config.connection import connect, make_data_converter
from tests.devserver import DevServer, free_port
from tests.test_codec import codec, encrypted_run, env_with

playwright_api = pytest.importorskip("playwright.async_api", reason="the playwright package is not installed")
pytestmark = pytest.mark.server  # it starts a Temporal dev server of its own, with the Web UI
LOAD_MS = 90_000  # a starved machine's UI can take long to fetch the history and post it to the codec


def chromium() -> str | None:
    """A Chromium to drive: $CHROMIUM, the system's, or None for playwright's own download."""
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


class UIDevServer(DevServer):
    """The dev server with its Web UI, optionally wired to a codec server."""

    def __init__(self, workdir: Path, codec_endpoint: str | None) -> None:
        super().__init__(workdir)
        self.ui_port = free_port()
        self.codec_endpoint = codec_endpoint

    @property
    def ui(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    def command(self) -> list[str]:
        cmd = [*super().command(), "--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        cmd.remove("--headless")
        if self.codec_endpoint:
            cmd += ["--ui-codec-endpoint", self.codec_endpoint]
        return cmd


@pytest.fixture
def ui_codec_server() -> Iterator[CodecServer]:
    port = free_port()
    origins = [f"http://127.0.0.1:{port}"]  # replaced below, once the UI's port is known
    server = CodecServer(("127.0.0.1", port), codec(), origins)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
async def browser() -> Any:
    async with playwright_api.async_playwright() as pw:
        try:
            launched = await pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        except Exception as err:
            pytest.skip(
                "no Chromium to drive: apt-get install chromium (playwright's own download is not reachable "
                f"from every machine) or set CHROMIUM ({str(err).splitlines()[0]})"
            )
        yield launched
        await launched.close()


async def open_history(browser: Any, url: str) -> Any:
    """The history page, once its event rows are drawn (bounded)."""
    page = await browser.new_page(viewport={"width": 1400, "height": 1800})
    await page.goto(url, timeout=LOAD_MS)
    await page.locator('tr[data-testid="event-summary-row"]').first.wait_for(timeout=LOAD_MS)
    return page


async def body_once(page: Any, *wanted: str, timeout: float = LOAD_MS / 1000) -> str:
    """The page's text once every wanted piece is in it, or its last text when the bound passes."""
    deadline = time.monotonic() + timeout
    while True:
        shown = await page.inner_text("body")
        if all(piece in shown for piece in wanted) or time.monotonic() > deadline:
            return shown
        await asyncio.sleep(0.25)


async def test_the_web_ui_shows_the_decrypted_tool_result_only_through_the_codec_server(
    ui_codec_server, browser, tmp_path: Path, registry, settings, task_queue
):
    server = UIDevServer(tmp_path / "temporal", ui_codec_server.url)
    server.workdir.mkdir()
    ui_codec_server.origins = {server.ui, f"http://localhost:{server.ui_port}"}
    server.start()
    try:
        sealed = await connect(server.target, "default", converter=make_data_converter(env_with(tmp_path)))
        run_id = await encrypted_run(sealed, task_queue, registry, settings, "zanzibar: what's the weather in Tokyo?")
        history = await sealed.get_workflow_handle(run_id).fetch_history()
        run = history.events[0].workflow_execution_started_event_attributes.original_execution_run_id
        url = f"{server.ui}/namespaces/default/workflows/{run_id}/{run}/history"

        # With the codec server: the tool's result, decrypted, in the expanded event.
        page = await open_history(browser, url)
        row = page.locator('tr[data-testid="event-summary-row"]', has_text='"tool":"get_weather"')
        await row.first.wait_for(timeout=LOAD_MS)  # decoded through the codec server
        assert await row.count() == 1, await page.inner_text("body")
        event_id = await row.first.get_attribute("data-eventid")
        await row.first.click()
        shown = await body_once(page, '\\"condition\\":\\"sunny\\"', "tool: get_weather(city=Tokyo)")
        await page.screenshot(path=str(tmp_path / "with-codec.png"), full_page=True)
        assert '\\"condition\\":\\"sunny\\"' in shown, shown  # the tool's own output, not the answer
        assert "zanzibar: what's the weather in Tokyo?" in shown  # the decrypted input
        assert "tool: get_weather(city=Tokyo)" in shown  # and the activity summaries
        await page.close()

        # The same history, the UI without the codec server: ciphertext.
        server.stop()
        server.codec_endpoint = None
        server.start()
        page = await open_history(browser, url)
        await page.locator(f'tr[data-eventid="{event_id}"]').first.click()
        [completed] = [e for e in history.events if e.event_id == int(event_id or 0)]
        assert completed.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        ciphertext = base64.b64encode(completed.activity_task_completed_event_attributes.result.payloads[0].data)
        shown = await body_once(page, ciphertext.decode()[:40])
        await page.screenshot(path=str(tmp_path / "without-codec.png"), full_page=True)
        for secret in ("sunny", "zanzibar", "get_weather", "Tokyo"):
            assert secret not in shown, secret
        assert ciphertext.decode()[:40] in shown, shown
        await page.close()
    finally:
        server.stop()
