"""Differential: through the binding, every classifier kind gives the reference's rule ids on
every packet of the 1K and 10K ClassBench traces of all 12 seeds, and on a sample of the 100K
ones — as built, after removing 10% of the rules, after inserting them back with their ids and
priorities, and after inserting 10% new rules (ClassBench lines appended: priority 0, next ids).

The oracle of each state is a reference classifier built afresh over that state's rule lines (not
the reference updated through the binding), so an update the binding gets wrong shows up as a
mismatch even if it were wrong the same way in the reference.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest

import rqvs
from conftest import SEEDS, rule_lines, rules_path, trace_path

KINDS = [k for k in rqvs.CLASSIFIERS if k != "ref"]


def oracle(lines: List[str], ids: List[int], headers: np.ndarray) -> np.ndarray:
    """The winners over ``lines`` (a ClassBench file's lines, first match) named by ``ids``."""
    fresh = rqvs.Classifier.from_rules(lines, kind="ref").classify(headers)
    named = np.asarray(ids, dtype=np.int64)
    return np.where(fresh >= 0, named[np.maximum(fresh, 0)], -1)


def check(what: str, got: np.ndarray, want: np.ndarray) -> None:
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{what}: {bad.size} mismatches of {want.size}; first at packet {bad[0]}: {got[bad[0]]} != {want[bad[0]]}"


class Workload:
    """A rule set, its headers, the updates the tests make and each state's expected ids."""

    def __init__(self, d: Path, seed: str, size: str, headers: np.ndarray):
        self.path = rules_path(d, seed, size)
        self.lines = rule_lines(self.path)
        n = len(self.lines)
        self.headers = headers
        rng = random.Random(f"{seed}_{size}")
        self.removed = sorted(rng.sample(range(n), max(1, n // 10)))
        # New rules: 10% as many lines of the next seed's 1K set, appended.
        other = rule_lines(rules_path(d, SEEDS[(SEEDS.index(seed) + 1) % len(SEEDS)], "1k"))
        self.added = rng.sample(other, min(len(other), max(1, n // 10)))
        gone = set(self.removed)
        kept = [i for i in range(n) if i not in gone]
        self.want_full = oracle(self.lines, list(range(n)), headers)
        self.want_removed = oracle([self.lines[i] for i in kept], kept, headers)
        self.want_added = oracle(self.lines + self.added, list(range(n + len(self.added))), headers)

    def run(self, c, what: str) -> None:
        n = len(self.lines)
        check(f"{what}: as built", c.classify(self.headers), self.want_full)
        for i in self.removed:
            c.remove(i)
        assert len(c) == n - len(self.removed)
        check(f"{what}: after removing {len(self.removed)} rules", c.classify(self.headers), self.want_removed)
        for i in self.removed:
            assert c.insert(self.lines[i], priority=n - i, id=i) == i
        check(f"{what}: after inserting them back", c.classify(self.headers), self.want_full)
        ids = [c.insert(line) for line in self.added]
        assert ids == list(range(n, n + len(self.added)))
        assert len(c) == n + len(self.added)
        check(f"{what}: after inserting {len(self.added)} new rules", c.classify(self.headers), self.want_added)


_cache: Dict[Tuple[str, str], Workload] = {}


def workload(d: Path, seed: str, size: str, sample: int = 0) -> Workload:
    key = (seed, size)
    if key not in _cache:
        _cache.clear()  # one set at a time: the tests are ordered by set
        h = rqvs.read_trace(trace_path(d, seed, size))
        if sample:
            h = h[np.sort(np.random.default_rng(7).choice(len(h), sample, replace=False))]
        _cache[key] = Workload(d, seed, size, h)
    return _cache[key]


# Stacked parametrize varies the top one fastest: every kind on a set before the next set.
@pytest.mark.parametrize("kind", KINDS + ["live-instant", "live-delayed"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("size", ["1k", "10k"])
def test_every_packet(data, seed, size, kind):
    w = workload(data, seed, size)
    if kind.startswith("live-"):
        policy = kind.split("-")[1]
        c = rqvs.LiveNuevoMatch.from_file(w.path, policy=policy)
        check_live(w, c, policy)
    else:
        w.run(rqvs.Classifier.from_file(w.path, kind=kind), kind)


def check_live(w: Workload, c, policy: str) -> None:
    """The update sequence of ``Workload.run`` on LiveNuevoMatch. With the delayed policy an
    inserted rule is visible only once a model holding it is swapped in, so the inserts are
    checked after training has caught up."""
    if policy == "instant":
        w.run(c, "live-instant")
        c.finish_training()
        c.poll()
        check("live-instant: after training", c.classify(w.headers), w.want_added)
        return
    n = len(w.lines)
    check("live-delayed: as built", c.classify(w.headers), w.want_full)
    for i in w.removed:
        c.remove(i)
    check("live-delayed: after removing", c.classify(w.headers), w.want_removed)
    for i in w.removed:
        c.insert(w.lines[i], priority=n - i, id=i)
    # Training starts as soon as a rule is staged, so some may already be visible: only the state
    # after training is known.
    for _ in range(2):
        c.poll()
        c.finish_training()
    assert c.staged == 0 and len(c.sessions()) >= 1
    check("live-delayed: after training", c.classify(w.headers), w.want_full)


SAMPLE_SEEDS = ["acl1", "fw2", "ipc1"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", SAMPLE_SEEDS)
def test_100k_sample(data, seed, kind):
    """100K rules, 5,000 packets sampled from the 1M-packet trace (the reference scans all rules)."""
    w = workload(data, seed, "100k", sample=5000)
    w.run(rqvs.Classifier.from_file(w.path, kind=kind), f"{kind} 100k")
