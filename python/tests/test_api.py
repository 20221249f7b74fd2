"""The binding's own behaviour: header forms, rule ids and priorities of inserts, ovs-ofctl rules,
the live trainer, the GIL, threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

import rqvs

REPO = Path(__file__).resolve().parents[2]
DEFAULT_RULES = REPO / "data" / "default" / "acl1_1k_rules.xz"
DEFAULT_TRACE = REPO / "data" / "default" / "acl1_1k_trace.xz"


@pytest.fixture(scope="module")
def trace() -> np.ndarray:
    return rqvs.read_trace(DEFAULT_TRACE)


@pytest.fixture(scope="module")
def want(trace) -> np.ndarray:
    return rqvs.Classifier.from_file(DEFAULT_RULES, kind="ref").classify(trace)


def plain(h: np.ndarray, columns: int) -> np.ndarray:
    return np.stack([h[f].astype(np.uint32) for f in rqvs.FIELDS[:columns]], axis=1)


def test_read_trace(trace):
    assert trace.dtype == rqvs.HEADER_DTYPE and len(trace) == 9328
    assert (trace["in_port"] == 1).all() and (trace["dl_type"] == 0x0800).all()
    assert (trace["tcp_flags"] != 0).any(), "the ClassBench flags column reaches tcp_flags"
    assert set(np.unique(trace["nw_proto"])) >= {6, 17}
    port7 = rqvs.read_trace(DEFAULT_TRACE, in_port=7)
    assert (port7["in_port"] == 7).all()


def test_every_header_form_gives_the_same_ids(trace, want):
    c = rqvs.Classifier.from_file(DEFAULT_RULES, kind="tm")
    assert (c.classify(trace) == want).all()
    # Plain: the 6 columns with tcp_flags carry all a ClassBench packet has.
    for columns in range(6, 12):
        assert (c.classify(plain(trace, columns)) == want).all(), columns
    # Without tcp_flags, rules that need a flag set (acl1 has some) stop matching.
    five = c.classify(plain(trace, 5))
    assert (five != want).any() and (five[trace["tcp_flags"] == 0] == want[trace["tcp_flags"] == 0]).all()
    # A structured array with only some fields, in any order; the rest take their defaults.
    some = np.zeros(len(trace), dtype=[("tcp_flags", np.int64), ("nw_dst", np.uint32), ("nw_src", np.uint64),
                                       ("nw_proto", np.uint8), ("tp_dst", np.int32), ("tp_src", np.uint16)])
    for f in some.dtype.names:
        some[f] = trace[f]
    assert (c.classify(some) == want).all()
    # Not contiguous: every other packet, and a Fortran-ordered array.
    assert (c.classify(plain(trace, 6)[::2]) == want[::2]).all()
    assert (c.classify(np.asfortranarray(plain(trace, 6))) == want).all()
    assert (c.classify(trace[::3]) == want[::3]).all()
    # Read-only arrays are fine; an empty one gives no ids.
    ro = plain(trace, 6)
    ro.setflags(write=False)
    assert (c.classify(ro) == want).all()
    empty = c.classify(np.zeros((0, 5), dtype=np.uint32))
    assert empty.dtype == np.int64 and empty.shape == (0,)


def test_fields_beyond_the_five_tuple_matter():
    c = rqvs.Classifier.from_rules(
        [
            "priority=30,in_port=3,ip,nw_src=10.0.0.0/8,actions=drop",
            "priority=20,dl_src=00:00:00:00:00:0a,actions=output:2",
            "priority=10,vlan_tci=0x1005,actions=drop",
            "priority=5,ip,nw_tos=32,actions=drop",
            "priority=1,actions=drop",
        ],
        kind="ofproto",
    )
    h = np.zeros(5, dtype=rqvs.HEADER_DTYPE)
    h["in_port"] = [3, 1, 1, 1, 1]
    h["dl_type"] = 0x0800
    h["nw_src"] = 10 << 24
    h["dl_src"][1] = 0x0A
    h["vlan_tci"][2] = 0x1005
    h["nw_tos"][3] = 32
    assert c.classify(h).tolist() == [0, 1, 2, 3, 4]
    # The same packets as plain columns (no MACs there): packet 1 falls through to rule 4.
    assert c.classify(plain(h, 11)).tolist() == [0, 4, 2, 3, 4]
    # Fields not given take a ClassBench packet's: in_port 1, IPv4, no TCP flags.
    d = rqvs.Classifier.from_rules(["priority=9,in_port=2,actions=drop", "priority=8,in_port=1,tcp,tcp_flags=0,actions=drop"], kind="tm")
    assert d.classify(np.array([[1, 2, 3, 4, 6]], dtype=np.uint32)).tolist() == [1]
    assert d.classify(np.array([[1, 2, 3, 4, 6, 0, 2]], dtype=np.uint32)).tolist() == [0]
    assert d.classify(np.array([[1, 2, 3, 4, 6, 1]], dtype=np.uint32)).tolist() == [-1]
    assert d.classify(np.array([[1, 2, 3, 4, 17]], dtype=np.uint32)).tolist() == [-1]
    proto_only = np.zeros(1, dtype=[("nw_proto", np.uint8)])
    proto_only["nw_proto"] = 6
    assert d.classify(proto_only).tolist() == [1]


def test_insert_ids_and_priorities(trace, want):
    lines = [ln for ln in rqvs_lines() if ln]
    c = rqvs.Classifier.from_rules(lines[:100], kind="nmu")
    assert len(c) == 100 and c.kind == "nmu"
    # ClassBench lines appended: ids 100.., priority 0, so first match among them, as in a file.
    ids = [c.insert(ln) for ln in lines[100:]]
    assert ids == list(range(100, len(lines)))
    assert (c.classify(trace) == want).all()
    # An explicit priority puts a rule above the others: a match-all rule wins everywhere.
    top = c.insert("@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000", priority=1 << 30)
    assert top == len(lines) and (c.classify(trace) == top).all()
    c.remove(top)
    assert (c.classify(trace) == want).all()
    # An id given is used; the next default id comes after the largest seen.
    assert c.insert(lines[0].replace("@", "@", 1), priority=0, id=5000) == 5000
    assert c.insert(lines[1]) == 5001


def rqvs_lines():
    import lzma

    return lzma.decompress(DEFAULT_RULES.read_bytes()).decode().splitlines()


def test_ofctl_rules_and_inserts():
    c = rqvs.Classifier.from_rules(["priority=10,tcp,tp_dst=80,actions=drop", "priority=5,ip,actions=output:1"], kind="tss")
    h = np.array([[1, 2, 1000, 80, 6], [1, 2, 1000, 81, 6], [1, 2, 1000, 80, 17]], dtype=np.uint32)
    assert c.classify(h).tolist() == [0, 1, 1]
    assert c.insert("priority=20,udp,actions=drop") == 2
    assert c.classify(h).tolist() == [0, 1, 2]
    assert c.insert("udp,actions=drop # OpenFlow's default priority 32768") == 3
    assert c.classify(h).tolist() == [0, 1, 3]
    assert c.stats() is not None and c.memory_bytes() > 0


def test_live_trainer_swaps_models_in(trace, want):
    lines = rqvs_lines()
    half = len(lines) // 2
    n = len(lines)
    live = rqvs.LiveNuevoMatch.from_rules(lines[:half], policy="instant", retrain_threshold=0.05)
    assert live.policy == "instant" and len(live) == half
    # The second half appended (priority 0, ids half..n-1: first match among them, below the
    # first half), far past the threshold, so the trainer runs.
    assert [live.insert(lines[i]) for i in range(half, n)] == list(range(half, n))
    assert len(live) == n
    assert (live.classify(trace) == want).all()
    for _ in range(3):
        live.finish_training()
        live.poll()
    assert len(live.sessions()) >= 1 and {"rules", "train_ms", "swap_ms"} <= set(live.sessions()[0])
    assert (live.classify(trace) == want).all()
    assert 0.0 < live.coverage <= 1.0 and live.remainder_rules >= 0 and not live.staged


def test_gil_released_during_lookups():
    """While one thread classifies, another keeps running Python code: its longest pause is a
    scheduling delay, not the length of the lookups (as it would be with the GIL held)."""
    rules = [f"@{i % 250}.{i // 250}.0.0/16\t0.0.0.0/0\t0 : 65535\t{i % 1000} : {i % 1000 + 10}\t0x06/0xFF\t0x0000/0x0000" for i in range(5000)]
    c = rqvs.Classifier.from_rules(rules, kind="ref")
    rng = np.random.default_rng(1)

    def headers(n):
        h = rng.integers(0, 1 << 16, size=(n, 5)).astype(np.uint32)
        h[:, 4] = 6
        return h

    # As many headers as take about 0.6 s on this machine (one call must be long enough that a
    # held GIL would show as a pause of its length).
    t0 = time.perf_counter()
    c.classify(headers(5_000))
    per_key = (time.perf_counter() - t0) / 5_000
    n = min(4_000_000, max(60_000, int(0.6 / per_key)))
    h = headers(n)
    stop = threading.Event()
    last = [time.perf_counter()]
    longest = [0.0]

    def spin():
        while not stop.is_set():
            now = time.perf_counter()
            longest[0] = max(longest[0], now - last[0])
            last[0] = now

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        longest[0] = 0.0
        t0 = time.perf_counter()
        out = c.classify(h)
        spent = time.perf_counter() - t0
    finally:
        stop.set()
        t.join()
    print(f"the other thread's longest pause: {longest[0] * 1e3:.1f} ms during {spent * 1e3:.0f} ms of lookups")
    assert spent > 0.2, f"the lookups took {spent:.3f} s: too short to tell"
    assert longest[0] < spent / 2, (longest[0], spent)
    assert out.shape == (n,)


def test_threads_classify_at_once(trace, want):
    c = rqvs.Classifier.from_file(DEFAULT_RULES, kind="nmu")
    results = {}

    def work(i):
        results[i] = all((c.classify(trace) == want).all() for _ in range(5))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    # Updates from this thread meanwhile, of a rule no packet of the trace matches (protocol 254).
    for _ in range(200):
        i = c.insert("@10.0.0.0/8\t10.0.0.0/8\t0 : 65535\t0 : 65535\t0xFE/0xFF\t0x0000/0x0000", priority=1 << 20)
        c.remove(i)
    for t in threads:
        t.join()
    assert results == {i: True for i in range(4)}
