"""What grpc.aio's client call does not do right for a stream, done here once.

grpc.aio's `StreamStreamCall.write` meets a call that the server ended under
it with a failed batch, and then records its own status, INTERNAL "Internal
error from Core", over the one the server sent: the agent would never learn
that it was refused, or told to come back later. `send_message` sends the
same way, but leaves the call's status to the server, so that reading it
after a failed send gives what the server said.
"""

from __future__ import annotations

import asyncio
from typing import Any

from grpc._cython import cygrpc

__all__ = ["CallOver", "send_message"]


class CallOver(Exception):  # noqa: N818 (an outcome, read by the one caller)
    """The send did not happen: the call is over; its status says how it ended."""


async def send_message(call: Any, data: bytes) -> None:
    """Send `data` on the grpc.aio stream-stream `call` (raw bytes, no serializer).

    Raises:
        CallOver: the call is over, or ended while sending; read its status.
        asyncio.InvalidStateError: the agent's side is already half-closed.
    """
    core = getattr(call, "_cython_call", None)
    if core is None or not hasattr(call, "_metadata_sent"):  # a grpc.aio this does not know
        try:
            await call.write(data)
        except asyncio.InvalidStateError:
            # grpc.aio says the same for a call that is over and for a side
            # already half-closed: only the first has a status to read.
            if call.done():
                raise CallOver from None
            raise
        return
    if call.done():
        raise CallOver
    if call._done_writing_flag:
        raise asyncio.InvalidStateError("the call is half-closed")
    if not call._metadata_sent.is_set():
        await call._metadata_sent.wait()
        if call.done():
            raise CallOver
    try:
        await core.send_serialized_message(data)
    except cygrpc.InternalError:
        # The batch failed because the call ended: its status is on its way.
        raise CallOver from None
    except asyncio.CancelledError:
        if not call.cancelled():
            call.cancel()
        raise
