"""Renewals: an ack finds the live MNS receipt handle while the lease keeper replaces handles."""

from __future__ import annotations

import threading
import time

from sources.mns.client import Renewals


def _replace(renewals: Renewals, old: str, new: str) -> None:
    renewals.begin(old)
    renewals.end(old, new)


def test_newest_follows_the_chain_of_replacements() -> None:
    r = Renewals()
    _replace(r, "h1", "h2")
    _replace(r, "h2", "h3")
    assert r.newest("h1", timeout=1) == "h3"
    assert r.newest("x", timeout=1) == "x"  # never replaced


def test_newest_waits_for_a_change_in_flight_on_the_last_link() -> None:
    """The keeper is replacing the newest handle as the ack asks: deleting with it would fail."""
    r = Renewals()
    _replace(r, "h1", "h2")
    r.begin("h2")  # a ChangeMessageVisibility of h2 is on the wire
    done = threading.Timer(0.2, r.end, args=("h2", "h3"))
    done.start()
    started = time.monotonic()
    assert r.newest("h1", timeout=5) == "h3"
    assert time.monotonic() - started >= 0.15
    done.join()


def test_newest_gives_up_waiting_after_its_timeout() -> None:
    r = Renewals()
    _replace(r, "h1", "h2")
    r.begin("h2")  # never ends
    started = time.monotonic()
    assert r.newest("h1", timeout=0.2) == "h2"
    assert 0.15 <= time.monotonic() - started < 2


def test_a_cycle_in_the_chain_ends_the_walk() -> None:
    r = Renewals()
    _replace(r, "h1", "h2")
    _replace(r, "h2", "h1")
    assert r.newest("h1", timeout=1) in {"h1", "h2"}
