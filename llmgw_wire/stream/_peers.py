"""What the peers of one control plane share, and how much of it one peer may take.

A peer is what a hostile client cannot multiply for free: its address (the
host, whatever the port; an IPv6 host's /64 network, which one site is
given whole), or, under mutual TLS, its certificate's identity.
Calls and connections are free to open, so every budget that many calls
share is also divided per peer here: calls waiting to register, the side
calls of the health and reflection services, the bytes of messages held, and
the turns at decoding a large message.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import weakref
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from llmgw_wire.stream._tls import PeerCertificate

if TYPE_CHECKING:
    import grpc.aio

__all__ = [
    "DecodeTurns",
    "PeerBytes",
    "Shares",
    "address_of",
    "decode_turns",
    "peer_of",
    "peer_of_call",
]

T = TypeVar("T")


def peer_of(address: str, certificate: PeerCertificate | None = None) -> str:
    """Who a call is from, for the budgets: its certificate's identity, else its host.

    Args:
        address: the call's address, as grpc says it without its scheme
            ("127.0.0.1:5555", "[::1]:5555"); an IPv6 host is its /64
            network ("::/64"), as a site holds a /64's addresses at once.
        certificate: the client's verified certificate (mutual TLS), if any.
    """
    if certificate is not None:
        names = certificate.subject_alt_names or (*certificate.dns_names, *certificate.uris)
        return "certificate " + (", ".join(sorted(names)) or certificate.common_name or "")
    host, colon, port = address.rpartition(":")
    if not (colon and port.isdigit()):
        return address
    if host.startswith("["):
        try:
            return str(ipaddress.IPv6Network(f"{host[1:-1]}/64", strict=False))
        except ValueError:  # not an address grpc would give: the host as it is
            return host
    return host


def address_of(peer: str | None) -> str:
    """A call's address from grpc's peer ("ipv4:127.0.0.1:5555", "ipv6:[::1]:5555")."""
    if not peer:
        return "an unknown address"
    _, _, address = peer.partition(":")
    return address or peer


def peer_of_call(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    """`peer_of` the call whose context this is."""
    certificate = PeerCertificate.from_auth_context(context.auth_context())
    return peer_of(address_of(context.peer()), certificate)


class Shares(Generic[T]):
    """Things counted against a total and against each peer's share of it (calls, say)."""

    __slots__ = ("_counts", "_peers", "per_peer", "total")

    def __init__(self, total: int, per_peer: int) -> None:
        self.total = total
        self.per_peer = per_peer
        self._peers: dict[T, str] = {}
        self._counts: collections.Counter[str] = collections.Counter()

    def __len__(self) -> int:
        return len(self._peers)

    def of(self, peer: str) -> int:
        """How many `peer` holds now."""
        return self._counts[peer]

    def enter(self, thing: T, peer: str) -> str | None:
        """Count `thing` for `peer`; else why not: "server" (the total) or "peer" (its share)."""
        if len(self._peers) >= self.total:
            return "server"
        if self._counts[peer] >= self.per_peer:
            return "peer"
        self._peers[thing] = peer
        self._counts[peer] += 1
        return None

    def leave(self, thing: T) -> None:
        """`thing` no longer counts (nothing happens if it did not)."""
        peer = self._peers.pop(thing, None)
        if peer is not None:
            left = self._counts[peer] - 1
            if left:
                self._counts[peer] = left
            else:
                del self._counts[peer]


class PeerBytes:
    """The bytes of one peer's messages that the sessions hold: read, decoded, or handed over.

    Each message counts its size (after decompression) from when its
    decoding may begin until `handle` asks for the value after it, so that
    neither read-ahead nor a slow `handle` holds more than `budget` bytes of
    a peer's messages, whatever the number of its calls. One message is let
    in when the peer holds nothing, whatever its size (up to the message
    limit): a peer is never stuck.

    A message read while the budget is full waits, its bytes in hand (each
    call has one read under way, and grpc brings its message in whole): those
    waiting are bounded by the budget too, so that a peer's calls, however
    many, hold at most twice the budget (and one message) before decoding.
    """

    __slots__ = ("__weakref__", "_waiters", "budget", "held", "key", "waiting")

    def __init__(self, key: str, budget: int) -> None:
        self.key = key
        self.budget = budget
        self.held = 0
        #: Bytes of messages read that wait for room in `held`.
        self.waiting = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def __repr__(self) -> str:
        return f"<PeerBytes {self.key} held={self.held} budget={self.budget}>"

    def take(self, size: int) -> bool:
        """Count `size` bytes now if they fit (no waiting); whether they did."""
        if self.held and self.held + size > self.budget:
            return False
        self.held += size
        return True

    def may_wait(self, size: int) -> bool:
        """Whether a message of `size` bytes may wait for room (else its call is ended)."""
        return not self.waiting or self.waiting + size <= self.budget

    async def wait_take(self, size: int) -> None:
        """Count `size` bytes, once they fit (`may_wait` said they may wait)."""
        self.waiting += size
        try:
            while not self.take(size):
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                except BaseException:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
                    elif self._waiters:  # woken, then cancelled: the next one tries instead
                        self._wake()
                    raise
        finally:
            self.waiting -= size

    def give_back(self, size: int) -> None:
        """`size` bytes counted before are no longer held."""
        if size:
            self.held -= size
            self._wake()

    def _wake(self) -> None:
        # Every waiter tries again, in order: they are the peer's own calls, a few.
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)


#: Large messages decoded at once, per event loop.
DECODE_SLOTS: Final = 1


class DecodeTurns:
    """The event loop's slot for decoding large messages, given to peers in turn.

    Among the peers waiting, the slot goes round-robin: a peer with one
    message waiting gets the next turn after at most one of each other
    peer's, however many messages a flood has queued before it.
    """

    __slots__ = ("_free", "_queues")

    def __init__(self, slots: int = DECODE_SLOTS) -> None:
        self._free = slots
        # The peers waiting, in the order of their turns, each with its waits.
        self._queues: dict[object, collections.deque[asyncio.Future[None]]] = {}

    async def acquire(self, peer: object) -> None:
        """Wait for the slot, in `peer`'s turn; `release` it after."""
        if self._free and not self._queues:
            self._free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._queues.setdefault(peer, collections.deque()).append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # given the slot, then cancelled: the next peer's turn
            else:
                queue = self._queues.get(peer)
                if queue is not None and waiter in queue:
                    queue.remove(waiter)
                    if not queue:
                        del self._queues[peer]
            raise

    def release(self) -> None:
        """Give the slot to the next peer in turn, or free it."""
        while self._queues:
            peer = next(iter(self._queues))
            queue = self._queues.pop(peer)
            waiter = queue.popleft()
            if queue:
                self._queues[peer] = queue  # its next message waits for the others' turns
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, DecodeTurns] = (
    weakref.WeakKeyDictionary()
)


def decode_turns() -> DecodeTurns:
    """The running event loop's `DecodeTurns`."""
    loop = asyncio.get_running_loop()
    turns = _turns.get(loop)
    if turns is None:
        turns = _turns[loop] = DecodeTurns()
    return turns
