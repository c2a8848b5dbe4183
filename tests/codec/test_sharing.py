"""`decode` shares equal values: one object for equal healths, MIG slices, placements, maps, tuples.

Fewer objects per registration is less for the garbage collector to walk in a
control plane that keeps a fleet's registrations. The values are frozen, so a
shared one is seen only by `is`; what decode gives is still equal to what was
encoded, and a map it had not seen is still parsed (and refused) strictly.
"""

from __future__ import annotations

import gc
from sys import getsizeof

import attrs
import pytest

from llmgw_wire import DecodeError, Registration, decode, encode, v1
from llmgw_wire.codec._binary import compiled_upb
from llmgw_wire.domain import GPU, Compute, GPUHealth, Node
from llmgw_wire.mapping._compiler import INTERNED_BYTES, INTERNED_MAX, _Interned
from llmgw_wire.testing.sample import sample_registration
from tests.support import ld

REGISTER_LABELS = 4  # `Register.labels`, a map of strings


@pytest.fixture(autouse=True)
def _empty_tables() -> None:
    """Each test starts with empty tables: what earlier tests left may fill one mid-test."""
    for value in compiled_upb().structure[GPU].__globals__.values():
        if isinstance(value, _Interned):
            value.reset()


def _tracked_own(value: Registration, other: Registration) -> list[object]:
    """The objects the collector tracks that `value` holds and `other` does not share."""

    def reach(root: object) -> dict[int, object]:
        seen: dict[int, object] = {}
        stack = [root]
        while stack:
            item = stack.pop()
            if id(item) in seen or not (attrs.has(type(item)) or type(item) is tuple):
                continue
            seen[id(item)] = item
            stack.extend(gc.get_referents(item))
        return seen

    theirs = reach(other)
    return [o for key, o in reach(value).items() if key not in theirs and gc.is_tracked(o)]


def _node(number: int) -> Registration:
    value = sample_registration()
    node_id = f"node-{number}"
    node = attrs.evolve(value.node, id=node_id, hostname=f"{node_id}.example")
    shards = tuple(attrs.evolve(shard, node_id=node_id) for shard in value.shards)
    return Registration(node, shards)


def test_equal_values_of_one_registration_and_of_the_next_are_one_object() -> None:
    first, second = (decode(encode(_node(n)), Registration) for n in (1, 2))
    assert (first, second) == (_node(1), _node(2))
    healths = {id(gpu.health) for r in (first, second) for gpu in r.node.gpus}
    assert len(healths) == len({gpu.health for gpu in first.node.gpus})
    for a, b in zip(first.node.gpus, second.node.gpus, strict=True):
        assert a.health is b.health
        assert a.mig is b.mig
        assert a.nic_paths is b.nic_paths or not a.nic_paths
        assert a.nvlink_peers is b.nvlink_peers or not a.nvlink_peers
    assert first.node.labels is second.node.labels
    assert first.node.host is second.node.host
    for shard, next_shard in zip(first.shards, second.shards, strict=True):
        assert shard.compute is next_shard.compute
        assert shard.gpu_indices is next_shard.gpu_indices or not shard.gpu_indices
    # The tuples of shared values too: the same weights, storage and fabrics, one tuple.
    assert first.node.weights is second.node.weights
    assert first.node.storage is second.node.storage
    assert first.node.fabrics is second.node.fabrics
    # What each registration owns: itself, its node, its GPUs, its shards and their tuples.
    own = _tracked_own(second, first)
    gpus, shards = len(second.node.gpus), len(second.shards)
    assert len(own) <= 2 + gpus + shards + 2, sorted({type(o).__name__ for o in own})


def test_a_tuple_of_shared_values_is_shared_only_with_the_same_values_in_order() -> None:
    value = sample_registration()
    weights = value.node.weights
    assert len(weights) >= 2
    other = attrs.evolve(weights[0], path="/models/another")
    ways = [weights, weights[::-1], (weights[0], other), weights[:1]]
    decoded = [
        decode(encode(Registration(attrs.evolve(value.node, weights=w))), Registration).node.weights
        for w in ways
    ]
    assert decoded == ways
    assert len({id(w) for w in decoded}) == len(ways)


def test_a_tuple_of_shared_values_is_its_values_after_their_table_starts_again() -> None:
    """Found by its items' identities: never the tuple of other items that had the same."""
    value = sample_registration()
    weights_table = compiled_upb().structure[GPU].__globals__["_interned_LocalWeights"]
    for n in range(50):
        weights = tuple(attrs.evolve(w, path=f"/models/{n}{w.path}") for w in value.node.weights)
        node = attrs.evolve(value.node, weights=weights)
        assert decode(encode(Registration(node)), Registration).node.weights == weights
        if n % 2:
            # The items are then held by their tuple's table alone, or freed with it.
            weights_table.reset()
        gc.collect()


def test_unequal_values_are_not_shared() -> None:
    value = sample_registration()
    gpus = value.node.gpus
    hot = attrs.evolve(gpus[0], health=GPUHealth(ecc_errors=3, temperature_c=91, problems=("x",)))
    node = attrs.evolve(value.node, gpus=(*gpus, attrs.evolve(hot, index=len(gpus))))
    decoded = decode(encode(Registration(node, value.shards)), Registration)
    assert decoded.node.gpus[-1].health == hot.health
    assert decoded.node.gpus[-1].health is not decoded.node.gpus[0].health


def test_a_map_not_seen_before_is_refused_as_any_field_is() -> None:
    # A labels entry whose value is not UTF-8: refused as a parse of every
    # field refuses it (`decode` into a wire class), naming the field.
    entry = ld(1, b"k") + ld(2, b"\xff")
    data = ld(1, b"n1") + ld(REGISTER_LABELS, entry)
    with pytest.raises(DecodeError) as refused:
        decode(data, Registration)
    with pytest.raises(DecodeError) as by_fields:
        decode(data, v1.Register)
    assert str(refused.value) == str(by_fields.value)
    assert "labels" in str(refused.value)


def test_a_map_entry_with_an_unknown_field_keeps_its_key() -> None:
    # As Go's runtime reads it: the entry is the message it is on the wire.
    entry = ld(1, b"zone") + ld(2, b"a") + bytes([3 << 3, 7])
    data = ld(1, b"n1") + ld(REGISTER_LABELS, entry)
    for _ in range(2):  # parsed, then seen before
        assert decode(data, Node).labels == {"zone": "a"}


def test_the_tables_bound_the_bytes_they_hold() -> None:
    """A tuple's text counts: a peer's megabytes of distinct healths are not kept after them."""
    table = compiled_upb().structure[GPU].__globals__["_interned_GPUHealth"]
    for n in range(4):
        problems = (f"{n}" * (INTERNED_BYTES // 3), "overheated")
        gpu = GPU(index=0, health=GPUHealth(problems=problems))
        value = Registration(Node(id="n1", gpus=(gpu,)))
        assert decode(encode(value), Registration) == value
        texts = sum(getsizeof(text) for key in table for text in key[2])
        assert texts <= table.held <= INTERNED_BYTES
    assert 0 < len(table) <= INTERNED_MAX


def test_a_placement_is_shared_across_shard_reports() -> None:
    from llmgw_wire import ShardReport, State

    compute = Compute("cuda", ("cuda:0", "cuda:1"), 28, 28)
    reports = [ShardReport(f"r{n}", f"r{n}-s0", State.READY, "", compute) for n in range(3)]
    decoded = [decode(encode(report), ShardReport) for report in reports]
    assert decoded == reports
    assert decoded[0].compute is decoded[1].compute is decoded[2].compute


@pytest.mark.parametrize("classes", ["CLASSES", "DECODE_CLASSES", "DOMAIN_CLASSES"])
def test_the_structure_functions_read_a_map_as_each_parse_gives_it(classes: str) -> None:
    # A map, its entries as messages, or its entries' bytes: the same value.
    from llmgw_wire.codec import _schema as schema

    value = sample_registration()
    message = getattr(schema, classes)["llmgw.v1.Register"].FromString(encode(value))
    assert compiled_upb().structure[Registration](message) == value


def test_a_table_of_tuples_counts_the_bytes_of_their_elements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Numbers hold no text: a tuple of many is bounded by what its numbers take.
    from llmgw_wire.mapping import _compiler as compiler

    bound = 1 << 20
    monkeypatch.setattr(compiler, "INTERNED_BYTES", bound)
    table = compiled_upb().structure[GPU].__globals__["_TUPLES"]
    for n in range(4):
        peers = tuple(range(1000 + 10_000 * n, 10_000 * (n + 1)))  # 9,000 numbers of 28 bytes
        value = Registration(Node(id="n1", gpus=(GPU(index=0, nvlink_peers=peers),)))
        assert decode(encode(value), Registration) == value
        taken = sum(getsizeof(key) + sum(map(getsizeof, key)) for key in table)
        assert taken <= table.held <= bound
