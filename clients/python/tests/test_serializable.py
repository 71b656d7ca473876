"""Against real serializable clusters with interactive transactions (occ, 2pl and ser; 1 datacenter, 2 partitions)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import grpc
import pytest

import snowline

if TYPE_CHECKING:
    from conftest import Cluster

ABORT_CAUSES = {"conflict", "certification", "vote", "deadlock", "timeout", "user"}


def test_the_protocol_offers_interactive_transactions(serializable: Cluster) -> None:
    with serializable.connect() as client:
        info = client.info()
        assert info.protocol == serializable.protocol
        assert info.offers.interactive, info
        assert info.level, info


def test_an_interactive_transaction_commits_and_its_writes_are_read_back(serializable: Cluster, unique) -> None:
    a, b = unique("txn-a"), unique("txn-b")
    with serializable.connect() as client:
        client.put(a, "10")
        with client.transaction() as t:
            balance = int(t.get(a) or 0)
            t.put(a, str(balance - 3))
            t.put(b, "3")
            assert t.get(a) == "7"  # a read of a key the transaction wrote returns the buffered value
            assert t.state == "open"
        assert t.state == "committed"
        assert client.rot([a, b]) == ["7", "3"]
        assert client.get(a) == "7"


def test_an_exception_in_the_block_aborts_and_propagates(serializable: Cluster, unique) -> None:
    key = unique("txn-raise")
    with serializable.connect() as client:
        client.put(key, "before")

        class Oops(Exception):
            pass

        with pytest.raises(Oops), client.transaction() as t:
            assert t.get(key) == "before"
            t.put(key, "after")
            raise Oops()
        assert t.state == "aborted"
        assert client.get(key) == "before"
        # The session can run another transaction.
        with client.transaction() as t:
            t.put(key, "later")
        assert client.get(key) == "later"


def test_conflicting_transactions_one_commits_and_the_other_aborts_with_a_cause(
    serializable: Cluster, unique
) -> None:
    key = unique("conflict")
    with serializable.connect() as client:
        client.put(key, "0")
        s1, s2 = client.session(), client.session()
        t1 = s1.transaction().begin()
        t2 = s2.transaction().begin()
        assert t1.get(key) == "0"
        assert t2.get(key) == "0"
        t1.put(key, "1")
        t2.put(key, "2")
        outcomes: dict[str, object] = {}

        def commit(name: str, t: snowline.Transaction) -> None:
            try:
                t.commit()
                outcomes[name] = "committed"
            except snowline.SnowlineError as e:
                outcomes[name] = e

        if serializable.protocol in ("occ", "ser"):
            # Reads lock nothing: t1 commits, and t2's certification finds the version it read overwritten.
            commit("t1", t1)
            commit("t2", t2)
            assert outcomes["t1"] == "committed", outcomes
            loser = outcomes["t2"]
        else:
            # 2PL: both hold shared locks; the older one's commit wounds the younger (or the younger waits
            # and is wounded by the older's commit): one commits, the other aborts.
            first = threading.Thread(target=commit, args=("t1", t1))
            first.start()
            first.join(timeout=2.0)
            commit("t2", t2)
            first.join(timeout=30.0)
            assert not first.is_alive()
            committed = [n for n, o in outcomes.items() if o == "committed"]
            assert len(committed) == 1, outcomes
            loser = outcomes["t2" if committed == ["t1"] else "t1"]
        assert isinstance(loser, snowline.Aborted), loser
        assert loser.cause in ABORT_CAUSES, repr(loser)
        assert loser.kind in ("conflict", "aborted")
        assert isinstance(loser, snowline.Conflict), f"a concurrency abort should be retryable: {loser!r}"
        assert loser.retryable
        expected = "1" if outcomes.get("t1") == "committed" else "2"
        assert client.get(key) == expected
        s1.close()
        s2.close()


def test_run_transaction_retries_a_conflict_until_it_commits(serializable: Cluster, unique) -> None:
    key = unique("retry")
    with serializable.connect() as client, serializable.connect() as other:
        client.put(key, "1")
        attempts = 0
        interferer: snowline.Transaction | None = None
        if serializable.protocol == "2pl":
            # An older transaction that read the key: its commit wounds the first attempt.
            interferer = other.transaction().begin()
            assert interferer.get(key) == "1"

        def increment(t: snowline.Transaction) -> int:
            nonlocal attempts
            attempts += 1
            value = int(t.get(key) or 0)
            if attempts == 1:
                if interferer is None:
                    other.put(key, "100")  # occ, ser: the read is stale at commit (certification)
                else:
                    def interfere() -> None:
                        assert interferer is not None
                        interferer.put(key, "100")
                        interferer.commit()

                    done = threading.Thread(target=interfere)
                    done.start()
                    done.join(timeout=30.0)
            t.put(key, str(value + 1))
            return value + 1

        result = client.run_transaction(increment, retries=5)
        assert attempts >= 2
        assert result == 101
        assert client.get(key) == "101"


def test_run_transaction_gives_up_after_its_retries(serializable: Cluster, unique) -> None:
    if serializable.protocol == "2pl":
        pytest.skip("a conflict on every attempt is simple to force with certification (occ, ser)")
    key = unique("give-up")
    with serializable.connect() as client, serializable.connect() as other:
        client.put(key, "0")
        attempts = 0

        def always_stale(t: snowline.Transaction) -> None:
            nonlocal attempts
            attempts += 1
            t.get(key)
            other.put(key, str(attempts))
            t.put(key, "mine")

        with pytest.raises(snowline.Conflict):
            client.run_transaction(always_stale, retries=2, backoff=0.001)
        assert attempts == 3


def test_a_deadline_that_runs_out_is_outcome_unknown(serializable: Cluster, unique) -> None:
    if serializable.protocol != "2pl":
        pytest.skip(f"{serializable.protocol} never waits for a lock; the 2pl run covers a deadline running out")
    key = unique("deadline")
    with serializable.connect() as client:
        client.put(key, "0")
        holder, waiter = client.session(), client.session()
        t1 = holder.transaction().begin()
        assert t1.get(key) == "0"  # a shared lock, held until t1 ends
        t2 = waiter.transaction(timeout=0.3).begin()  # younger: it waits for t1 (wound-wait)
        t2.put(key, "1")
        with pytest.raises(snowline.OutcomeUnknown) as e:
            t2.commit()
        assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED, repr(e.value)
        assert t2.state == "unknown"
        t1.abort()
        # Still serving; t2 may or may not have committed.
        assert client.get(key) in ("0", "1")
        holder.close()
        waiter.close()


def test_a_stored_procedure_call(serializable: Cluster, unique) -> None:
    a, b = unique("call-a"), unique("call-b")
    with serializable.connect() as client:
        if not client.info().offers.stored_procedures:
            with pytest.raises(snowline.NotOffered):
                client.call("rw", [1, a, b, "y"])
            return
        client.put(a, "x")
        result = client.call("rw", [1, a, b, "y"])
        assert [(r.key, r.value) for r in result.reads] == [(a, "x")]
        assert result.writes == [(b, "y")]
        assert client.get(b) == "y"
        with pytest.raises(snowline.InvalidArgument):
            client.call("no-such-procedure", ["1"])


def test_writes_in_a_transaction_need_the_transaction_open(serializable: Cluster, unique) -> None:
    with serializable.connect() as client:
        t = client.transaction()
        with pytest.raises(RuntimeError):
            t.put(unique("closed"), "x")
        with t:
            t.put(unique("open"), "x")
        with pytest.raises(RuntimeError):
            t.put(unique("done"), "x")


def test_a_session_with_an_open_transaction_refuses_its_other_calls(serializable: Cluster, unique) -> None:
    key = unique("busy")
    with serializable.connect() as client:
        client.put(key, "0")
        with client.transaction() as t:
            t.put(key, "1")
            with pytest.raises(snowline.InvalidArgument):
                client.get(key)
            with client.session() as other:  # another session is free to read
                assert other.get(key) == "0"  # t's write is buffered until its commit
        assert client.get(key) == "1"
