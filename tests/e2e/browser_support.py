"""A player in headless Chromium (Debian's chromium and chromedriver, driven by Selenium), and
SDK players beside it, for the browser tests of the web client (issue 24).

(Kept out of conftest.py so that tests import it by a unique name.)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import grpc
from e2e_terminal import ROOT
from greedy_player import play_seat
from masa.table.v1 import table_pb2, table_pb2_grpc, view_pb2
from masa_client.client import TableClient
from masa_client.matchmaking import MatchmakingClient
from masa_platform.testing import token
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

__all__ = ["SHOTS", "Browser", "SdkPlayers", "SeatReader", "browser"]

T = TypeVar("T")

# Where the screenshots of every step are kept, one folder per test.
SHOTS = ROOT / ".masa" / "test" / "browser"


class Browser:
    """One browser page, found by the client's ``data-testid``s; a screenshot per step."""

    def __init__(self, shots: Path) -> None:
        options = webdriver.ChromeOptions()
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
            options.add_argument(flag)
        options.add_argument("--window-size=1280,1000")
        options.binary_location = "/usr/bin/chromium"
        self.driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        self._shots = shots
        self._taken = 0
        shots.mkdir(parents=True, exist_ok=True)
        for old in shots.glob("*.png"):
            old.unlink()

    def close(self) -> None:
        self.driver.quit()

    def shot(self, step: str) -> Path:
        self._taken += 1
        path = self._shots / f"{self._taken:02d}-{step}.png"
        self.driver.save_screenshot(str(path))
        return path

    def all(self, testid: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, f'[data-testid="{testid}"]')

    def find(self, testid: str, *, timeout: float = 30.0) -> WebElement:
        return self.until(
            lambda: next(iter(self.all(testid)), None), f"{testid} on the page", timeout
        )

    def attribute(self, testid: str, name: str) -> str:
        return self.find(testid).get_attribute(name) or ""

    def click(self, testid: str, *, timeout: float = 30.0) -> None:
        def clicked() -> bool:
            for element in self.all(testid):
                try:
                    if element.is_enabled():
                        element.click()
                        return True
                except (StaleElementReferenceException, WebDriverException):
                    return False
            return False

        self.until(clicked, f"an enabled {testid} to click", timeout)

    def until(self, found: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = found()
            except StaleElementReferenceException:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                self.shot("timed-out")
                raise AssertionError(f"waited {timeout:.0f} s for {what}")
            time.sleep(0.05)


@contextlib.contextmanager
def browser(shots: Path) -> Iterator[Browser]:
    page = Browser(shots)
    try:
        yield page
    finally:
        page.close()


class SeatReader:
    """The player's own seat view over native gRPC (what the browser shows must match), on
    one channel per engine node for the whole test: the node that answers is asked first."""

    def __init__(self, engines: list[str], player: str) -> None:
        self._channels = [grpc.insecure_channel(address) for address in engines]
        self._metadata = (("authorization", f"Bearer {token(player, ttl_seconds=3600)}"),)
        self._first = 0

    def close(self) -> None:
        for channel in self._channels:
            channel.close()

    def view(self, table_id: str) -> view_pb2.SeatView:
        request = table_pb2.GetTableRequest(table_id=table_id)
        failure: grpc.RpcError | None = None
        for turn in range(len(self._channels)):
            at = (self._first + turn) % len(self._channels)
            stub = table_pb2_grpc.TableServiceStub(self._channels[at])
            try:
                answer: table_pb2.GetTableResponse = stub.GetTable(
                    request, metadata=self._metadata, timeout=10
                )
            except grpc.RpcError as error:  # another node serves it, or this one restarts
                failure = error
                continue
            self._first = at
            return answer.seat_view
        raise AssertionError(f"no engine node serves {table_id}: {failure}")


class SdkPlayers:
    """Players of the Python SDK over native gRPC, in a thread of their own: each queues in a
    lobby, is seated, and plays its seat greedily until the game ends or the test stops it."""

    def __init__(self, stack: dict[str, str], lobby: str, names: list[str]) -> None:
        self._stack = stack
        self._lobby = lobby
        self.names = names
        self.tables: dict[str, str] = {}
        self.errors: list[BaseException] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._main: asyncio.Task[None] | None = None

    def __enter__(self) -> SdkPlayers:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        # The players may have finished (their loop closed) or still play: stop them.
        if self._main is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._main.cancel)
        self._thread.join(30)

    def _run(self) -> None:
        async def main() -> None:
            self._main = asyncio.current_task()
            await asyncio.gather(*(self._play(name) for name in self.names))

        with contextlib.suppress(asyncio.CancelledError):
            self._loop.run_until_complete(main())
        self._loop.close()

    async def _play(self, name: str) -> None:
        try:
            async with MatchmakingClient(self._stack["matchmaking"], token(name)) as matchmaking:
                ticket = await matchmaking.create_ticket(self._lobby, display_name=name)
                async for update in matchmaking.watch_ticket(ticket.ticket_id):
                    if update.table_id:
                        ticket = update
                        break
            self.tables[name] = ticket.table_id
            nodes = [self._stack["table-engine"], self._stack["table-engine-1"]]
            async with TableClient(ticket.table_address, token(name), nodes=nodes) as client:
                await play_seat(client, ticket.table_id, name)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # reported to the test, which fails on it
            self.errors.append(error)
