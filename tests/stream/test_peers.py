"""Who a call is from, for the budgets the peers of one control plane share."""

from __future__ import annotations

import pytest

from llmgw_wire.stream._peers import address_of, peer_of


@pytest.mark.parametrize(
    ("peer", "key"),
    [
        ("ipv4:127.0.0.1:5555", "127.0.0.1"),
        ("ipv4:10.1.2.3:1", "10.1.2.3"),
        # One site is given a whole /64: its addresses are one peer.
        ("ipv6:[::1]:5555", "::/64"),
        ("ipv6:[2001:db8:1:2::7]:5555", "2001:db8:1:2::/64"),
        ("ipv6:[2001:db8:1:2:ffff:ffff:ffff:ffff]:80", "2001:db8:1:2::/64"),
        ("ipv6:[2001:db8:1:3::7]:5555", "2001:db8:1:3::/64"),
        ("unix:/run/plane.sock", "/run/plane.sock"),
    ],
)
def test_a_peer_is_its_host_and_an_ipv6_host_its_network(peer: str, key: str) -> None:
    assert peer_of(address_of(peer)) == key
