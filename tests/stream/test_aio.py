"""`send_message` on a grpc.aio call whose internals it does not know: the public path."""

from __future__ import annotations

import asyncio

import pytest

from llmgw_wire.stream._aio import CallOver, send_message


class PublicCall:
    """A call with only grpc.aio's public surface, as an unknown grpcio version has."""

    def __init__(self, *, over: bool, half_closed: bool) -> None:
        self.over = over
        self.half_closed = half_closed
        self.sent: list[bytes] = []

    async def write(self, data: bytes) -> None:
        if self.over or self.half_closed:
            raise asyncio.InvalidStateError("no more writes")
        self.sent.append(data)

    def done(self) -> bool:
        return self.over


def test_the_public_path_sends() -> None:
    call = PublicCall(over=False, half_closed=False)
    asyncio.run(send_message(call, b"x"))
    assert call.sent == [b"x"]


def test_the_public_path_tells_a_call_that_is_over_from_a_half_closed_side() -> None:
    # Over: the caller reads the status. Half-closed: no status is coming, the
    # caller must not wait for one.
    with pytest.raises(CallOver):
        asyncio.run(send_message(PublicCall(over=True, half_closed=False), b"x"))
    with pytest.raises(asyncio.InvalidStateError):
        asyncio.run(send_message(PublicCall(over=False, half_closed=True), b"x"))
