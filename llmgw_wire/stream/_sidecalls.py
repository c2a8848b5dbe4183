"""The side calls of a control plane's server: a health `Watch`, server reflection.

Anyone who can connect may open them, before any registration: each is
counted against the server's budget of them and its peer's share while it is
open (`ServerLimits.max_side_calls`, `max_side_calls_per_peer`), and ends,
with OK, after their lifetime (`ServerLimits.side_call_lifetime`), so that
neither a flood of them nor one held forever keeps a connection from being
closed when idle. `SideCall` does both, for each service alike.
"""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import grpc
import grpc.aio

from llmgw_wire.stream._cancel import uncancel
from llmgw_wire.stream._peers import peer_of_call

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

    from llmgw_wire.stream._peers import Shares

__all__ = ["OVER", "TOO_MANY_SIDE_CALLS", "SideCall"]

T = TypeVar("T")

#: The details of a side call refused for the server's budget of them, or its peer's share.
TOO_MANY_SIDE_CALLS: Final = {
    "server": "too many health and reflection calls open on this server",
    "peer": "too many health and reflection calls open from this peer",
}


class _Over(enum.Enum):
    OVER = "the side call's lifetime is over"


#: What `SideCall.wait` gives once the call's lifetime is over.
OVER: Final = _Over.OVER

# The message of the cancellation that ends a wait at the lifetime's end.
_LIFETIME_OVER: Final = OVER.value


class SideCall:
    """One side call, from its admission to its end, within its lifetime.

    `async with SideCall(calls, context, lifetime) as call:` counts the call
    in `calls` (one over the server's budget or its peer's share is ended
    with RESOURCE_EXHAUSTED, and the body never runs) until the body is left.
    Inside, `await call.wait(step)` awaits `step()` and gives its result, or
    `OVER` once the call has been open `lifetime` seconds: the call then
    ends, with OK. One loop timer bounds the whole call; when it runs, it
    cancels the wait under way, if any (that cancellation is taken back: the
    wait gives `OVER`), and every later wait gives `OVER` at once. What the
    call does between its waits (writing an answer) is never cut short.
    """

    __slots__ = ("_calls", "_context", "_cut", "_lifetime", "_over", "_timer", "_waiting")

    def __init__(
        self,
        calls: Shares[object] | None,
        context: grpc.aio.ServicerContext[Any, Any],
        lifetime: float | None,
    ) -> None:
        self._calls = calls
        self._context = context
        self._lifetime = lifetime
        self._timer: asyncio.TimerHandle | None = None
        self._over = False
        # The task whose wait is under way, if one is; whether the timer cancelled it.
        self._waiting: asyncio.Task[Any] | None = None
        self._cut = False

    async def __aenter__(self) -> SideCall:
        calls = self._calls
        if calls is not None:
            refused = calls.enter(self._context, peer_of_call(self._context))
            if refused is not None:
                await self._context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED, TOO_MANY_SIDE_CALLS[refused]
                )
        if self._lifetime is not None:
            self._timer = asyncio.get_running_loop().call_later(self._lifetime, self._expire)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._calls is not None:
            self._calls.leave(self._context)

    def _expire(self) -> None:
        self._timer = None
        self._over = True
        task = self._waiting
        if task is not None:
            self._cut = True
            task.cancel(_LIFETIME_OVER)

    async def wait(self, step: Callable[[], Awaitable[T]]) -> T | Literal[_Over.OVER]:
        """`await step()`: its result, or `OVER` once the lifetime is over (before or during it).

        Raises:
            asyncio.CancelledError: the call's task was cancelled otherwise
                (its client gone, the server stopping).
        """
        if self._over:
            return OVER
        task = asyncio.current_task()
        self._waiting = task
        try:
            result = await step()
        except asyncio.CancelledError:
            if self._cut and task is not None and self._take_back(task):
                return OVER
            raise
        finally:
            self._waiting = None
        if self._cut and task is not None:  # the step kept the timer's cancellation to itself
            self._take_back(task)
        return result

    def _take_back(self, task: asyncio.Task[Any]) -> bool:
        """Take the timer's cancellation of `task` back: whether it was the only one.

        On Python 3.11+ the task's count of cancellations tells, and another
        one stands. Python 3.10 cannot tell them apart: any is taken for the
        timer's, which is harmless here, as the call ends either way.
        """
        self._cut = False
        return uncancel(task)
