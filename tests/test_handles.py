"""Server-minted state handles (``scriptbridge._handles``): unguessable, bound to the identity
they were minted for, expiring, and refused with one error that never tells whose a handle is."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scriptbridge._handles import HANDLE_BYTES, PREFIX, HandleRefused, Handles


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def refusal(handles: Handles[str], handle: object, owner: str) -> str:
    with pytest.raises(HandleRefused) as refused:
        handles.look_up(handle, owner)
    return refused.value.reason


def test_a_handle_carries_at_least_128_random_bits_and_is_never_reused() -> None:
    handles: Handles[int] = Handles(60)
    minted = [handles.mint("a", n) for n in range(1000)]
    assert len(set(minted)) == 1000
    for handle in minted:
        assert handle.startswith(PREFIX)
        raw = base64.urlsafe_b64decode(handle.removeprefix(PREFIX) + "==")
        assert len(raw) == HANDLE_BYTES >= 16


def test_only_its_owner_can_use_a_handle() -> None:
    handles: Handles[str] = Handles(60)
    handle = handles.mint("token:alice", "alice's state")
    assert handles.look_up(handle, "token:alice").value == "alice's state"
    assert refusal(handles, handle, "token:bob") == "unknown"
    assert refusal(handles, "sb_made-up", "token:alice") == "unknown"


def test_an_expired_handle_says_expired_to_its_owner_only() -> None:
    clock = Clock()
    handles: Handles[str] = Handles(10, clock=clock)
    handle = handles.mint("a", "state")
    clock.now = 9.5
    assert handles.expired() == []
    handles.look_up(handle, "a")  # used at 9.5: lives until 19.5
    clock.now = 19.25
    assert handles.expired() == []
    clock.now = 19.5
    assert handles.expired() == [(handle, "state")]
    assert refusal(handles, handle, "a") == "expired"
    assert refusal(handles, handle, "b") == "unknown"  # as a foreign live one: nothing told


def test_a_handle_in_use_does_not_expire() -> None:
    clock = Clock()
    handles: Handles[str] = Handles(1, clock=clock)
    handle = handles.mint("a", "state")
    held = handles.look_up(handle, "a")
    held.in_use += 1
    clock.now = 100
    assert handles.expired() == []
    held.in_use -= 1
    assert [h for h, _ in handles.expired()] == [handle]


def test_idle_of_lists_the_owners_idle_handles_longest_unused_first() -> None:
    clock = Clock()
    handles: Handles[str] = Handles(60, clock=clock)
    first = handles.mint("a", "1")
    clock.now = 1
    second = handles.mint("a", "2")
    handles.mint("b", "3")
    clock.now = 2
    handles.look_up(first, "a")
    assert handles.idle_of("a") == [second, first]
    handles.held(second).in_use += 1  # in use: not idle
    assert handles.idle_of("a") == [first]


@given(
    owners=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=12),
    probe=st.one_of(st.text(max_size=200), st.none(), st.integers(), st.binary(max_size=40)),
    asker=st.sampled_from(["a", "b", "c"]),
)
def test_a_refusal_is_the_same_for_a_foreign_handle_and_a_made_up_one(
    owners: list[str], probe: object, asker: str
) -> None:
    """Whatever a caller passes, it is answered only when it is a live handle of its own;
    every other value is refused alike ("unknown": no expiry happened here)."""
    handles: Handles[int] = Handles(60)
    minted = {handles.mint(owner, n): owner for n, owner in enumerate(owners)}
    for handle, owner in minted.items():
        if owner == asker:
            assert handles.look_up(handle, asker).owner == asker
        else:
            assert refusal(handles, handle, asker) == "unknown"
    if probe not in minted:
        assert refusal(handles, probe, asker) == "unknown"
