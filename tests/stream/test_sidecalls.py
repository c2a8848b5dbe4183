"""`SideCall`: one timer bounds a side call's waits; what it does between them is never cut."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc.aio
import pytest

from llmgw_wire.stream._cancel import COUNTED
from llmgw_wire.stream._peers import Shares
from llmgw_wire.stream._sidecalls import OVER, SideCall
from tests.support import run_async as run

# Far shorter than any step below: the loop runs timers in the order they are due.
SHORT = 0.001


class Context:
    """What `SideCall` asks of grpc's servicer context: who the peer is, and abort."""

    def __init__(self) -> None:
        self.aborted: tuple[Any, str] | None = None

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    async def abort(self, code: Any, details: str) -> None:
        self.aborted = (code, details)
        raise grpc.aio.AbortError  # as grpc's does: the body never runs


def test_a_wait_under_way_gives_over_at_the_lifetime_and_every_later_one_at_once() -> None:
    async def main() -> None:
        never = asyncio.Event()
        async with SideCall(None, Context(), SHORT) as call:
            assert await call.wait(never.wait) is OVER
            task = asyncio.current_task()
            assert task is not None
            assert not COUNTED or task.cancelling() == 0  # type: ignore[attr-defined,unused-ignore]
            assert await call.wait(never.wait) is OVER

    run(main)


def test_what_the_call_does_between_its_waits_is_not_cut_short() -> None:
    async def main() -> None:
        async with SideCall(None, Context(), SHORT) as call:
            assert await call.wait(lambda: asyncio.sleep(0, "first")) == "first"
            # The lifetime ends during this (an answer being written, say): it goes on.
            await asyncio.sleep(SHORT * 50)
            assert await call.wait(lambda: asyncio.sleep(0, "second")) is OVER

    run(main)


def test_a_cancellation_from_elsewhere_stands() -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def watch() -> None:
            async with SideCall(None, Context(), 3600.0) as call:
                started.set()
                await call.wait(asyncio.Event().wait)

        task = asyncio.ensure_future(watch())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main)


def test_the_call_counts_while_open_and_one_over_the_budget_never_runs() -> None:
    async def main() -> None:
        calls: Shares[object] = Shares(total=4, per_peer=1)
        first = Context()
        async with SideCall(calls, first, None):
            assert calls.of("127.0.0.1") == 1
            refused = Context()
            with pytest.raises(grpc.aio.AbortError):
                async with SideCall(calls, refused, None):
                    raise AssertionError("a call over its peer's share ran")
            assert refused.aborted is not None
            assert refused.aborted[1] == "too many health and reflection calls open from this peer"
            assert calls.of("127.0.0.1") == 1
        assert len(calls) == 0

    run(main)


def test_without_a_lifetime_a_call_waits_as_long_as_its_steps_take() -> None:
    # `side_call_lifetime=None`, for a fleet whose agents watch health (grpc-go
    # takes the end of a Watch for a failed check): no timer ends the call.
    async def main() -> None:
        async with SideCall(None, Context(), None) as call:
            assert await call.wait(lambda: asyncio.sleep(SHORT * 50, "first")) == "first"
            await asyncio.sleep(SHORT * 50)
            assert await call.wait(lambda: asyncio.sleep(SHORT * 50, "second")) == "second"

    run(main)
