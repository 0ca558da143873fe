"""The crash test's oracle, key space and workload, on their own: logs read
back with torn lines, the verdict on recovered contents that are right and
on every kind of wrong one, and the state saved between cycles."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from lsmkv.base.merge_operators import UInt64Add
from lsmkv.crashtest.keyspace import MAX_KEY_LEN, KeySpace, content, describe, is_counter, value
from lsmkv.crashtest.oracle import (MERGE, RANGE, BadRead, ExpectedState, Intent, OpLog, OracleError, ThreadHistory,
                                    has_ttl, item_keys, op_id, read_op_log, verify)
from lsmkv.crashtest.workload import ThreadWorkload

SPACE = KeySpace(80, 2)  # thread 0 owns 0-19 and 40-59, thread 1 owns 20-39 and 60-79


def contents(state: ExpectedState) -> dict[bytes, bytes]:
    """What a database holding exactly ``state`` returns from a full scan."""
    out = {}
    for index in range(SPACE.size):
        data = state.expected_value(index)
        if data is not None:
            out[SPACE.key(index)] = data
    return out


def check(base: ExpectedState, histories: list[ThreadHistory], scanned: dict[bytes, bytes]):
    return verify(SPACE, base, histories, scanned, {SPACE.key(i): scanned.get(SPACE.key(i)) for i in range(SPACE.size)})


def put(op: str, *items) -> Intent:
    return Intent(op, "batch" if len(items) > 1 else "put", tuple(items))


def test_key_space_owners_kinds_and_values():
    keys = [SPACE.key(i) for i in range(SPACE.size)]
    assert len(set(keys)) == SPACE.size and max(map(len, keys)) <= MAX_KEY_LEN
    assert set(SPACE.owned_by(0)).isdisjoint(SPACE.owned_by(1))
    assert sorted(SPACE.owned_by(0) + SPACE.owned_by(1)) == list(range(SPACE.size))
    assert {SPACE.kind(i) for i in SPACE.owned_by(1)} == {"s", "c", "m", "L", "x"}  # every thread owns every kind
    v = value("c3.t1.n7", 25, 500)
    assert len(v) == 500 and v == value("c3.t1.n7", 25, 500) and v != value("c3.t1.n8", 25, 500)
    assert describe(v, 25) == "value of c3.t1.n7 (500 bytes)"
    assert describe(v, 26) == "value of c3.t1.n7 written to key 25 (500 bytes)"
    assert value("c3.t1.n7", 25, 0) == b"" and describe(None) == "absent"
    with pytest.raises(ValueError, match="at least 40 keys"):
        KeySpace(30, 2)


def test_workload_is_a_function_of_its_seed_and_writes_only_its_keys():
    def ops(seed, **kw):
        work = ThreadWorkload(SPACE, 1, 1, seed, maintenance=("flush", "compact"), **kw)
        return [work.next() for _ in range(2000)]

    first = ops(5)
    assert first == ops(5) and first != ops(6)
    kinds = {p.intent.kind for p in first}
    assert kinds == {"put", "delete", "batch", "ingest", "flush", "compact", "merge", "delete_range", "txn",
                     "rollback"}
    # An ingest is a table file: distinct keys, always durable.
    ingests = [p.intent for p in first if p.intent.kind == "ingest"]
    assert all(i.sync and len({item[0] for item in i.items}) == len(i.items) for i in ingests)
    owned = set(SPACE.owned_by(1))
    assert all(set(item_keys(item)) <= owned for p in first for item in p.intent.items)
    assert any(p.intent.sync for p in first) and not all(p.intent.sync for p in first)
    # Some puts carry a ttl: short ones and the long one; never a counter.
    ttls = [item for p in first for item in p.intent.items if has_ttl(item)]
    assert ttls and min(i[2] for i in ttls) <= 3000 and max(i[2] for i in ttls) == 86_400_000
    assert not any(is_counter(item[0]) for item in ttls)
    assert [p.intent.op for p in first[:2]] == ["c1.t1.n1", "c1.t1.n2"]
    # Merges add to counters; range deletes cover a stretch of one run (one kind, one block).
    items = [item for p in first for item in p.intent.items]
    merges = [item for item in items if item[1] == MERGE]
    ranges = [item for item in items if item[1] == RANGE]
    assert merges and all(is_counter(i) and n >= 1 for i, _, n in merges)
    assert ranges and all(SPACE.run_of(a) == SPACE.run_of(b) and a <= b for a, _, b in ranges)
    assert any(a < b for a, _, b in ranges)
    # Batches and transactions mix every kind of item; transactions read first.
    for kind in ("batch", "txn"):
        mixed = {item[1] if isinstance(item[1], str) else "delete" if item[1] is None else "put"
                 for p in first if p.intent.kind == kind for item in p.intent.items}
        assert mixed == {"put", "delete", MERGE, RANGE}, kind
    txns = [p for p in first if p.intent.kind in ("txn", "rollback")]
    assert all(p.reads and set(p.reads) <= owned for p in txns)
    # Without the features, the stream keeps to puts, deletes, batches and ingest.
    plain = ops(5, features=frozenset())
    assert {p.intent.kind for p in plain} == {"put", "delete", "batch", "ingest", "flush", "compact"}
    assert not any(isinstance(item[1], str) for p in plain for item in p.intent.items)


def test_op_log_round_trip_and_torn_last_line(tmp_path):
    path = str(tmp_path / "thread-0.log")
    log = OpLog(path)
    a = Intent(op_id(1, 0, 1), "put", ((0, 10),), True, at_ms=1000)
    b = Intent(op_id(1, 0, 2), "batch", ((1, None), (2, 5, 60_000)), at_ms=1002)  # an item with a ttl
    c = Intent(op_id(1, 0, 3), "flush", at_ms=1010)
    for intent in (a, b):
        log.intent(intent)
        log.ack(intent.op, at_ms=intent.at_ms + 3)
    log.intent(c)
    log.close()
    history = read_op_log(path, 0)
    assert history.acked == [replace(a, acked_ms=1003), replace(b, acked_ms=1005)]
    assert history.in_flight == c and history.torn_lines == 0
    with open(path, "ab") as f:
        f.write(b'{"ack":"c1.t0')  # the kill cut the ack short: the flush stays in flight
    history = read_op_log(path, 0)
    assert history.in_flight == c and history.torn_lines == 1
    assert read_op_log(str(tmp_path / "missing.log"), 3) == ThreadHistory(3)


def test_op_log_that_breaks_the_protocol_is_an_oracle_error(tmp_path):
    path = str(tmp_path / "thread-0.log")
    log = OpLog(path)
    log.intent(Intent("c1.t0.n1", "put", ((0, 1),)))
    log.intent(Intent("c1.t0.n2", "put", ((0, 1),)))
    log.close()
    with pytest.raises(OracleError, match="started before c1.t0.n1 was acknowledged"):
        read_op_log(path, 0)


def test_acknowledged_writes_must_all_be_there():
    base = ExpectedState({0: ("c1.t0.n1", 30), 1: ("c1.t0.n2", None), 20: ("c1.t1.n1", 5)}, 1)
    history = ThreadHistory(0, acked=[put("c2.t0.n1", (0, 12)), put("c2.t0.n2", (2, 0), (41, 100)),
                                      Intent("c2.t0.n3", "delete", ((3, None),))])
    expected = base.copy()
    for intent in history.acked:
        expected.apply(intent)
    verdict = check(base, [history, ThreadHistory(1)], contents(expected))
    assert verdict.ok and verdict.acked_writes == 3 and verdict.keys_checked == SPACE.size
    assert verdict.state.keys == expected.keys

    lost = contents(expected)
    del lost[SPACE.key(41)]
    stale = contents(expected)
    stale[SPACE.key(0)] = value("c1.t0.n1", 0, 30)
    back = contents(expected)
    back[SPACE.key(1)] = value("c1.t0.n0", 1, 9)
    extra = contents(expected)
    extra[SPACE.key(5)] = b"x"
    alien = contents(expected)
    alien[b"zz"] = b"1"
    for found, problem in ((lost, "acknowledged write lost"), (stale, "wrong value"), (back, "deleted key is back"),
                           (extra, "key never written is present"), (alien, "key outside the key space")):
        verdict = check(base, [history], found)
        assert [m.problem for m in verdict.mismatches] == [problem]
    assert "expected value of c1.t0.n2" not in str(check(base, [history], back).mismatches[0])
    assert "deleted by c1.t0.n2" in str(check(base, [history], back).mismatches[0])


def test_in_flight_write_may_be_all_there_or_not_at_all_but_never_partly():
    base = ExpectedState({0: ("c1.t0.n1", 30), 21: ("c1.t1.n1", 40)}, 1)
    batch = Intent("c2.t0.n1", "batch", ((0, None), (2, 50), (41, 7)))
    single = Intent("c2.t1.n1", "put", ((21, 3),))
    histories = [ThreadHistory(0, in_flight=batch), ThreadHistory(1, in_flight=single)]
    after = base.copy()
    after.apply(batch)

    verdict = check(base, histories, contents(after))
    assert verdict.ok
    assert [(o.op, o.outcome) for o in verdict.in_flight] == [("c2.t0.n1", "applied"), ("c2.t1.n1", "not applied")]
    assert verdict.state.keys == after.keys  # the next cycle continues from what the database holds

    partly = contents(base)
    partly[SPACE.key(2)] = value("c2.t0.n1", 2, 50)  # one item of three
    verdict = check(base, histories, partly)
    assert not verdict.ok and {m.problem for m in verdict.mismatches} == {"in-flight batch c2.t0.n1 partly applied"}
    assert len(verdict.mismatches) == 3 and verdict.in_flight[0].outcome == "partly applied"


def test_in_flight_write_without_visible_effect_and_maintenance():
    base = ExpectedState({2: ("c1.t0.n1", None)}, 1)
    histories = [ThreadHistory(0, in_flight=Intent("c2.t0.n1", "delete", ((2, None),))),
                 ThreadHistory(1, in_flight=Intent("c2.t1.n1", "compact"))]
    verdict = check(base, histories, {})
    assert verdict.ok
    assert [o.outcome for o in verdict.in_flight] == ["no visible effect", "maintenance"]


def test_an_in_flight_write_that_only_changes_a_ttl_stays_undecided_until_a_read_decides_it():
    """An empty value put again without a ttl over one with a ttl reads the
    same until the old deadline and differently after it: the kill that
    left the write in flight does not tell which happened, so the next
    cycles must allow both (both ways round), and a key read as absent
    stays absent."""
    key = SPACE.key(0)
    expiring = ExpectedState({0: ("c1.t0.n1", 0, (1000, 1010))}, 1)
    plain = ExpectedState({0: ("c1.t0.n1", 0, None)}, 1)

    def cycle(state, scanned, lo, in_flight=None):
        histories = [ThreadHistory(0, in_flight=in_flight)] if in_flight else []
        return verify(SPACE, state, histories, scanned, {SPACE.key(i): scanned.get(SPACE.key(i))
                                                          for i in range(SPACE.size)}, lo, lo + 2)

    # The ttl dropped by the write in flight, or not.
    drop = replace(Intent("c2.t0.n1", "put", ((0, 0),)), at_ms=1003)
    first = cycle(expiring, {key: b""}, 1004, drop)
    assert first.ok and [o.outcome for o in first.in_flight] == ["no visible effect"]
    assert cycle(first.state, {key: b""}, 5000).ok  # applied: no ttl any more
    assert cycle(first.state, {}, 5000).ok  # not applied: expired
    assert "or never" in first.state.explain(0)
    # A ttl added by the write in flight, or not.
    add = replace(Intent("c2.t0.n1", "put", ((0, 0, 100),)), at_ms=1000)
    first = cycle(plain, {key: b""}, 1050, add)
    assert first.ok and [o.outcome for o in first.in_flight] == ["no visible effect"]
    assert cycle(first.state, {key: b""}, 5000).ok  # not applied: no ttl
    assert cycle(first.state, {}, 5000).ok  # applied: expired
    assert [m.problem for m in cycle(first.state, {}, 1060).mismatches] == ["acknowledged write lost"]
    # A key read as absent, which a delete in flight or the deadline explains, stays absent.
    delete = replace(Intent("c2.t0.n1", "delete", ((0, None),)), at_ms=1003)
    first = cycle(expiring, {}, 1005, delete)
    assert first.ok and [o.outcome for o in first.in_flight] == ["no visible effect"]
    assert [m.problem for m in cycle(first.state, {key: b""}, 1006).mismatches] == ["deleted key is back"]
    # A write in flight whose outcome the read told apart is decided as before.
    assert [o.outcome for o in cycle(expiring, {key: b""}, 5000, drop).in_flight] == ["applied"]
    assert cycle(expiring, {key: b""}, 5000, drop).state.keys[0] == ("c2.t0.n1", 0, None)


def test_get_must_agree_with_scan():
    state = ExpectedState({0: ("c1.t0.n1", 10)}, 1)
    scanned = contents(state)
    looked_up = {SPACE.key(i): scanned.get(SPACE.key(i)) for i in range(SPACE.size)}
    looked_up[SPACE.key(0)] = None
    verdict = verify(SPACE, state, [], scanned, looked_up)
    assert [m.problem for m in verdict.mismatches] == ["get and scan disagree"]


def test_a_thread_writing_a_key_it_does_not_own_is_an_oracle_error():
    with pytest.raises(OracleError, match="does not own"):
        check(ExpectedState(), [ThreadHistory(1, acked=[put("c1.t1.n1", (0, 1))])], {})


def test_expected_state_saves_atomically_and_loads_back(tmp_path):
    path = str(tmp_path / "state.json")
    state = ExpectedState({3: ("c4.t0.n9", 12), 7: ("c4.t1.n2", None)}, 4)
    state.save(path)
    assert ExpectedState.load(path) == state and state.live_keys() == 1
    assert os.listdir(tmp_path) == ["state.json"]


def test_values_with_a_ttl_are_judged_by_their_deadline_window():
    """A put with a ttl of 1 s acknowledged between t=1000 and t=1010 ms
    expires between about 2000 and 2010 ms: before that it must be there,
    after that it must be gone, in between either is right."""
    acked = [replace(put("c1.t0.n1", (0, 30, 1000)), at_ms=1000, acked_ms=1010),
             replace(put("c1.t0.n2", (1, 20)), at_ms=1020, acked_ms=1021)]
    history = [ThreadHistory(0, acked=acked)]
    live = {SPACE.key(0): value("c1.t0.n1", 0, 30), SPACE.key(1): value("c1.t0.n2", 1, 20)}
    gone = {SPACE.key(1): value("c1.t0.n2", 1, 20)}

    def judge(scanned, lo, hi):
        return verify(SPACE, ExpectedState(), history, scanned,
                      {SPACE.key(i): scanned.get(SPACE.key(i)) for i in range(SPACE.size)}, lo, hi)

    assert judge(live, 1500, 1600).ok and not judge(gone, 1500, 1600).ok
    assert judge(gone, 2100, 2200).ok
    back = judge(live, 2100, 2200)
    assert [m.problem for m in back.mismatches] == ["expired key is back"]
    assert judge(live, 2000, 2005).ok and judge(gone, 2000, 2005).ok
    # The next cycle no longer expects a key that was gone for good.
    assert judge(gone, 2100, 2200).state.keys[0][1] is None
    # get and scan may disagree only about a key whose deadline falls between them.
    lookups = {SPACE.key(i): live.get(SPACE.key(i)) for i in range(SPACE.size)}
    lookups[SPACE.key(0)] = None
    assert verify(SPACE, ExpectedState(), history, live, lookups, 2000, 2005).ok
    assert not verify(SPACE, ExpectedState(), history, live, lookups, 1500, 1600).ok


def test_metadata_must_name_the_last_batch_whose_data_is_there():
    base = ExpectedState({0: ("c1.t0.n1", 30)}, 1, {0: "c1.t0.n1"})
    acked = Intent("c2.t0.n1", "batch", ((1, 10), (2, 10)), acked_ms=5)
    flying = Intent("c2.t0.n2", "batch", ((3, 10), (4, 10)))
    histories = [ThreadHistory(0, acked=[acked], in_flight=flying)]
    without = base.copy()
    without.apply(acked)
    with_flying = without.copy()
    with_flying.apply(flying)

    def run(state, meta):
        scanned = contents(state)
        return verify(SPACE, base, histories, scanned, {SPACE.key(i): scanned.get(SPACE.key(i))
                                                        for i in range(SPACE.size)}, meta=meta)

    assert run(without, {"crashtest/t0": b"c2.t0.n1"}).ok  # in flight, not applied: the acked batch
    assert run(with_flying, {"crashtest/t0": b"c2.t0.n2"}).ok  # applied: the in-flight batch
    # Data of the in-flight batch without its metadata, or the reverse: apart.
    for state, meta in ((with_flying, b"c2.t0.n1"), (without, b"c2.t0.n2"), (without, b"c1.t0.n1")):
        verdict = run(state, {"crashtest/t0": meta})
        assert [m.problem for m in verdict.mismatches] == ["metadata and data came apart"], meta
    assert not run(without, {}).ok  # the acknowledged batch's metadata lost
    saved = with_flying.copy()
    assert saved.meta == {0: "c2.t0.n2"}


def test_runs_and_range_bounds_cover_exactly_one_stretch_of_one_thread():
    space = KeySpace(2000, 4)
    keys = sorted((space.key(i), i) for i in range(space.size))
    assert space.run_of(0) == (0, 8) and space.run_of(10) == (9, 11) and space.run_of(59) == (59, 59)
    for first, last in ((0, 8), (3, 5), (9, 11), (30, 30), (39, 39), (57, 58), (1993, 1996)):
        start, end = space.range_bounds(first, last)
        inside = [i for key, i in keys if start <= key < end]
        assert inside == list(range(first, last + 1)), (first, last)
        assert {space.owner(i) for i in inside} == {space.owner(first)}
    with pytest.raises(ValueError, match="not a stretch of one run"):
        space.range_bounds(7, 10)  # short keys, then counters


def test_merges_add_to_counters_and_puts_and_deletes_reset_them():
    c = 9  # thread 0's first counter
    assert is_counter(c) and SPACE.kind(c) == "c"
    base = ExpectedState({c: ("c1.t0.n1", 100, None)}, 1)
    acked = [Intent("c2.t0.n1", "merge", ((c, MERGE, 5),), acked_ms=1),
             Intent("c2.t0.n2", "batch", ((c, MERGE, 7), (10, MERGE, 3), (11, 40), (11, MERGE, 2)), acked_ms=2)]
    state = base.copy()
    for intent in acked:
        state.apply(intent)
    assert [state.keys[i][1] for i in (c, 10, 11)] == [112, 3, 42]
    found = contents(state)
    assert found[SPACE.key(c)] == UInt64Add.operand(112) == content("any", c, 112)
    verdict = check(base, [ThreadHistory(0, acked=acked)], found)
    assert verdict.ok and verdict.acked_items == {"merge": 4}
    assert verdict.acked_kinds == {"merge": 1, "batch": 1}

    wrong = dict(found)
    wrong[SPACE.key(c)] = UInt64Add.operand(105)  # the batch's merge lost
    verdict = check(base, [ThreadHistory(0, acked=acked)], wrong)
    assert [str(m) for m in verdict.mismatches] == [
        f"{SPACE.key(c)!r}: wrong value: expected counter 112 (last set by c2.t0.n2), found counter 105"]

    # A delete, then a merge: the merge starts from nothing.
    reset = Intent("c3.t0.n1", "batch", ((c, None), (c, MERGE, 4)), acked_ms=3)
    state.apply(reset)
    assert state.keys[c][1] == 4


def test_in_flight_merge_is_applied_or_not_never_twice():
    c = 29  # thread 1's counter
    base = ExpectedState({c: ("c1.t1.n1", 10, None)}, 1)
    flying = ThreadHistory(1, in_flight=Intent("c2.t1.n1", "merge", ((c, MERGE, 6),)))
    for amount, outcome in ((10, "not applied"), (16, "applied")):
        verdict = check(base, [flying], {SPACE.key(c): UInt64Add.operand(amount)})
        assert verdict.ok and verdict.in_flight[0].outcome == outcome
        assert verdict.state.keys[c][1] == amount
    verdict = check(base, [flying], {SPACE.key(c): UInt64Add.operand(22)})
    assert [m.problem for m in verdict.mismatches] == ["in-flight merge c2.t1.n1 partly applied"]


def test_range_delete_applies_to_every_key_of_its_stretch():
    base = ExpectedState({i: ("c1.t0.n1", 20, None) for i in range(0, 9)} | {9: ("c1.t0.n2", 5, None)}, 1)
    acked = Intent("c2.t0.n1", "delete_range", ((2, RANGE, 6),), acked_ms=1)
    state = base.copy()
    state.apply(acked)
    assert [i for i in range(10) if state.keys[i][1] is None] == [2, 3, 4, 5, 6]
    verdict = check(base, [ThreadHistory(0, acked=[acked])], contents(state))
    assert verdict.ok and verdict.acked_items == {"range delete": 1}
    back = contents(state)
    back[SPACE.key(4)] = value("c1.t0.n1", 4, 20)
    verdict = check(base, [ThreadHistory(0, acked=[acked])], back)
    assert [m.problem for m in verdict.mismatches] == ["deleted key is back"]
    assert "deleted by c2.t0.n1" in str(verdict.mismatches[0])


def test_in_flight_range_delete_is_whole_or_absent_and_a_partial_one_fails():
    base = ExpectedState({i: ("c1.t1.n1", 20, None) for i in range(20, 29)}, 1)
    intent = Intent("c2.t1.n1", "delete_range", ((21, RANGE, 25),))
    histories = [ThreadHistory(1, in_flight=intent)]
    after = base.copy()
    after.apply(intent)

    verdict = check(base, histories, contents(after))
    assert verdict.ok and verdict.in_flight[0].outcome == "applied"
    assert verdict.state.keys[23] == ("c2.t1.n1", None, None)  # the next cycle expects the keys gone
    verdict = check(base, histories, contents(base))
    assert verdict.ok and verdict.in_flight[0].outcome == "not applied"
    assert verdict.state.keys[23] == ("c1.t1.n1", 20, None)

    partly = contents(after)
    partly[SPACE.key(25)] = value("c1.t1.n1", 25, 20)  # the last key of the stretch survived
    verdict = check(base, histories, partly)
    assert not verdict.ok and verdict.in_flight[0].outcome == "partly applied"
    assert {m.problem for m in verdict.mismatches} == {"in-flight delete_range c2.t1.n1 partly applied"}
    assert len(verdict.mismatches) == 5  # every key of the stretch is named


def test_range_over_two_runs_or_another_threads_keys_is_an_oracle_error():
    with pytest.raises(OracleError, match="not a stretch of one run"):
        check(ExpectedState(), [ThreadHistory(0, acked=[Intent("c1.t0.n1", "delete_range", ((7, RANGE, 10),))])], {})
    with pytest.raises(OracleError, match="does not own"):
        check(ExpectedState(), [ThreadHistory(1, acked=[Intent("c1.t1.n1", "delete_range", ((2, RANGE, 4),))])], {})


def test_in_flight_transaction_is_whole_or_absent():
    base = ExpectedState({0: ("c1.t0.n1", 30, None), 9: ("c1.t0.n2", 8, None), 4: ("c1.t0.n3", 12, None)}, 1)
    txn = Intent("c2.t0.n1", "txn", ((0, None), (9, MERGE, 2), (3, RANGE, 5), (4, 7), (41, 10, 60_000)), True,
                 at_ms=1000)
    histories = [ThreadHistory(0, in_flight=txn)]
    after = base.copy()
    after.apply(txn, done_by_ms=1100)
    assert after.keys[4] == ("c2.t0.n1", 7, None) and after.keys[9][1] == 10  # a put after the range stays

    def judge(found):
        return verify(SPACE, base, histories, found, {SPACE.key(i): found.get(SPACE.key(i))
                                                      for i in range(SPACE.size)}, 1050, 1100)

    applied, untouched = judge(contents(after)), judge(contents(base))
    assert applied.ok and applied.in_flight[0].outcome == "applied"
    assert untouched.ok and untouched.in_flight[0].outcome == "not applied"
    partly = contents(after)
    partly[SPACE.key(9)] = UInt64Add.operand(8)  # all but the merge
    verdict = judge(partly)
    assert {m.problem for m in verdict.mismatches} == {"in-flight txn c2.t0.n1 partly applied"}


def test_rolled_back_or_refused_transactions_change_nothing():
    base = ExpectedState({0: ("c1.t0.n1", 30, None)}, 1)
    items = ((0, 5), (9, MERGE, 3), (1, 4))
    rolled = Intent("c2.t0.n1", "rollback", items, acked_ms=1)
    refused = Intent("c2.t0.n2", "txn", items, acked_ms=2, refused=True)
    flying = Intent("c2.t0.n3", "rollback", items)
    histories = [ThreadHistory(0, acked=[rolled, refused], in_flight=flying)]
    verdict = check(base, histories, contents(base))
    assert verdict.ok and verdict.acked_writes == 0 and verdict.state.keys == base.keys
    assert verdict.acked_kinds == {"rollback": 1, "txn refused": 1}
    assert [o.outcome for o in verdict.in_flight] == ["rolled back"]
    for op in ("c2.t0.n1", "c2.t0.n2", "c2.t0.n3"):  # any of them leaking a write is caught
        leaked = contents(base)
        leaked[SPACE.key(1)] = value(op, 1, 4)
        verdict = check(base, histories, leaked)
        assert [m.problem for m in verdict.mismatches] == ["key never written is present"], op


def test_op_log_records_refused_commits_and_bad_reads(tmp_path):
    path = str(tmp_path / "thread-0.log")
    log = OpLog(path)
    txn = Intent("c1.t0.n1", "txn", ((0, 3), (9, MERGE, 1), (2, RANGE, 4)), at_ms=5)
    bad = BadRead("c1.t0.n1", 0, "value of c0.t0.n1 (3 bytes)", "absent")
    log.intent(txn)
    log.bad_read(bad)
    log.ack(txn.op, at_ms=9, refused=True)
    log.close()
    history = read_op_log(path, 0)
    assert history.acked == [replace(txn, acked_ms=9, refused=True)] and history.bad_reads == [bad]
    verdict = check(ExpectedState(), [history], {})
    assert [str(m) for m in verdict.mismatches] == [
        f"{SPACE.key(0)!r}: transaction c1.t0.n1 read a wrong value: expected value of c0.t0.n1 (3 bytes), "
        "found absent"]
