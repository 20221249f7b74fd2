"""replay, compare, gen_rules and gen_trace return the command line's `--json` reports: the same
keys at every level, the same values where a run is deterministic, the same files written."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

import rqvs
from conftest import cli_error

REPO = Path(__file__).resolve().parents[2]
DEFAULT_RULES = REPO / "data" / "default" / "acl1_1k_rules.xz"

# Values that differ between two runs of the same command: times and rates, and what they decide.
TIMING = {
    "build_ms", "pmd_s", "mpps", "ns_per_packet", "mpps_after_first_pass", "share_megaflow_after_first_pass",
    "share_emc", "share_megaflow", "share_model", "share_upcall", "share_revalidator", "series", "speedup",
    "speedup_after_first_pass", "git_rev", "generate_ms", "total_ms", "seconds", "counters", "design_report",
    "avg_subtables_per_hit", "avg_batch", "coverage", "updates",
    # Provenance: two builds (the extension and the binary) may differ in profile or dirty flag.
    "git_dirty", "git_rev_source", "build_profile",
}


def run_cli(cli: Path, *args: str) -> dict:
    """`rqvs ARGS --json FILE`'s report (replay and compare print their summary to stdout)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "report.json"
        r = subprocess.run([str(cli), *args, "--json", str(out)], capture_output=True, text=True, timeout=600, cwd=REPO)
        assert r.returncode == 0, r.stderr
        return json.loads(out.read_text())


# Lists sampled in time (one item per interval of the run): a run shorter than one interval on a
# loaded machine has none, so their items' keys are compared only when both sides have some.
SAMPLED = {"series"}


def keys(v, path=""):
    """Every key path of a JSON value (list items by their first element's keys; a time-sampled
    list's items not at all: `same_sampled` compares them)."""
    out = set()
    if isinstance(v, dict):
        for k, x in v.items():
            out.add(f"{path}.{k}")
            if k not in SAMPLED:
                out |= keys(x, f"{path}.{k}")
    elif isinstance(v, list) and v and isinstance(v[0], (dict, list)):
        out |= keys(v[0], f"{path}[]")
    return out


def same_sampled(ours, theirs) -> None:
    """A time-sampled list's items have the same keys on both sides when both have items."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for k, v in theirs.items():
            if k in SAMPLED and isinstance(v, list) and ours.get(k) and v:
                assert keys(ours[k][0]) == keys(v[0]), (k, keys(ours[k][0]) ^ keys(v[0]))
            elif k in ours:
                same_sampled(ours[k], v)
    elif isinstance(ours, list) and isinstance(theirs, list):
        for a, b in zip(ours, theirs):
            same_sampled(a, b)


def same_report(ours: dict, theirs: dict) -> None:
    assert keys(ours) == keys(theirs), (keys(ours) ^ keys(theirs))
    same_sampled(ours, theirs)
    for k, v in theirs.items():
        if k in TIMING:
            continue
        if k == "runs":
            for a, b in zip(ours[k], v):
                same_report(a, b)
            continue
        assert ours[k] == v, k


def test_replay_report(cli):
    ours = rqvs.replay(design="cflows", passes=2, seed=3)
    theirs = run_cli(cli, "replay", "--design", "cflows", "--passes", "2", "--seed", "3")
    assert ours["command"] == "replay" and ours["mismatches"] == 0 and ours["packets"] == 2 * 9328
    same_report(ours, theirs)
    # Every counter and design figure the command line reports is there.
    assert set(ours["counters"]) == set(theirs["counters"]) and set(ours["design_report"]) == set(theirs["design_report"])


def test_replay_options_reach_the_run(cli, tmp_path):
    ours = rqvs.replay(design="orig", emc=False, cd=True, updates="add:60@0s", verify=500, in_port=2, revalidator="inline")
    theirs = run_cli(cli, "replay", "--design", "orig", "--no-emc", "--cd", "--updates", "add:60@0s",
                     "--verify", "500", "--in-port", "2", "--revalidator", "inline")
    assert ours["emc"] is False and ours["cd"] is True and ours["verified"] == 500 and ours["updates"]
    same_report(ours, theirs)
    # An option the run would not use is an error, word for word the command line's.
    for bad, args in [
        (dict(design="cflows", revalidator="inline"), ["--design", "cflows", "--revalidator", "inline"]),
        (dict(emc=False, emc_prob=0.2), ["--no-emc", "--emc-prob", "0.2"]),
        (dict(emc=False, emc_entries=1024), ["--no-emc", "--emc-entries", "1024"]),
        (dict(design="ccache", policy="delayed"), ["--design", "ccache", "--policy", "delayed"]),
        (dict(rx_ring=64), ["--rx-ring", "64"]),
    ]:
        with pytest.raises(ValueError) as e:
            rqvs.replay(**bad)
        assert str(e.value) == cli_error(cli, "replay", *args, code=2)
    with pytest.raises(ValueError, match=re.escape("--emc-entries: expected a power of two from 2 to 2097152 (2^21), found 1000")):
        rqvs.replay(emc_entries=1000)
    big = rqvs.replay(design="orig", emc_entries=1 << 16, emc_prob=1.0, verify=500)
    assert big["emc_entries"] == 1 << 16 and big["mismatches"] == 0
    same_report(big, run_cli(cli, "replay", "--design", "orig", "--emc-entries", "65536", "--emc-prob", "1",
                             "--verify", "500"))
    with pytest.raises(ValueError) as e:
        rqvs.compare(designs=["orig", "ccache"], classifier="tm")
    assert str(e.value) == cli_error(cli, "compare", "--designs", "orig,ccache", "--classifier", "tm", code=2)
    pmds = rqvs.replay(design="orig", pmds=2)
    assert pmds["pmds"] == 2 and len(pmds["runs"]) == 2 and pmds["mismatches"] == 0
    same_report(pmds, run_cli(cli, "replay", "--design", "orig", "--pmds", "2"))


def test_compare_report(cli):
    ours = rqvs.compare(designs=["orig", "cflows"], passes=2)
    theirs = run_cli(cli, "compare", "--designs", "orig,cflows", "--passes", "2")
    assert ours["command"] == "compare" and ours["designs"] == ["orig", "cflows"]
    assert [r["design"] for r in ours["runs"]] == ["orig", "cflows"] and ours["runs"][0]["speedup"] == 1.0
    same_report(ours, theirs)


@pytest.mark.parametrize("fmt", ["classbench", "ofctl"])
def test_gen_rules_report_and_file(cli, data, tmp_path, fmt):
    ours = rqvs.gen_rules("fw2", 3000, tmp_path / "ours.txt", rng_seed=5, format=fmt, smoothing=2,
                          compare=data / "rules" / "fw2_1k.xz")
    theirs = run_cli(cli, "gen", "rules", "--seed-file", "fw2", "--count", "3000", "--rng-seed", "5", "--format", fmt,
                     "--smoothing", "2", "--compare", str(data / "rules" / "fw2_1k.xz"), "-o", str(tmp_path / "theirs.txt"))
    same_report(ours, theirs)
    assert ours["command"] == "gen rules" and ours["rules"] > 2000
    assert (tmp_path / "ours.txt").read_bytes() == (tmp_path / "theirs.txt").read_bytes()
    if fmt == "classbench":
        assert len(rqvs.Classifier.from_file(tmp_path / "ours.txt", kind="tm")) == ours["rules"]


@pytest.mark.parametrize("fmt", ["classbench", "pcap"])
def test_gen_trace_report_and_file(cli, tmp_path, fmt):
    ours = rqvs.gen_trace(DEFAULT_RULES, 20000, tmp_path / "ours", locality="zipf:1.1", rng_seed=9, format=fmt)
    theirs = run_cli(cli, "gen", "trace", "--rules", str(DEFAULT_RULES), "--packets", "20000", "--locality", "zipf:1.1",
                     "--rng-seed", "9", "--format", fmt, "-o", str(tmp_path / "theirs"))
    same_report(ours, theirs)
    assert ours["command"] == "gen trace" and ours["packets"] == 20000
    assert (tmp_path / "ours").read_bytes() == (tmp_path / "theirs").read_bytes()
    h = rqvs.read_trace(tmp_path / "ours")
    assert len(h) == 20000
    ref = rqvs.Classifier.from_file(DEFAULT_RULES, kind="ref").classify(h)
    assert (rqvs.Classifier.from_file(DEFAULT_RULES, kind="nmu").classify(h) == ref).all()
    assert ours["unmatched"] == int((ref < 0).sum())


def test_replay_prediction_and_rate_search(cli):
    """predict and rate_search reach the run, as --predict and --rate-search do."""
    ours = rqvs.replay(design="orig", predict="online", revalidator="inline")
    theirs = run_cli(cli, "replay", "--design", "orig", "--predict", "online", "--revalidator", "inline")
    assert ours["prediction"]["proposed"] > 0 and set(ours["prediction"]) == set(theirs["prediction"])
    # The online predictor's windows are in PMD time: its counts differ a little between runs.
    ours.pop("prediction"), theirs.pop("prediction")
    same_report(ours, theirs)
    ours = rqvs.replay(design="cflows", rate_search=True)
    theirs = run_cli(cli, "replay", "--design", "cflows", "--rate-search")
    assert ours["max_rate_below_1pct_drops"] and ours["unconstrained_mpps"] > 0 and ours["mismatches"] == 0
    assert keys(ours) == keys(theirs)
    for bad, message in [
        (dict(design="cflows", predict="online"), "--predict online: flow prediction installs megaflows through ORIG's slow path; expected --design orig, found 'cflows'"),
        (dict(predict="oracle"), "--predict oracle needs the coflow ground truth: --coflow-truth FILE (written by `rqvs gen coflows --truth-out`)"),
        (dict(predict="sometimes"), "--predict: expected off, online or oracle, found 'sometimes'"),
        (dict(rate_search=True, pmds=2), "--rate-search: runs on one PMD; --pmds is not used with it"),
    ]:
        with pytest.raises(ValueError) as e:
            rqvs.replay(**bad)
        assert str(e.value) == message


def test_cflows_with_tuplemerge_alone(cli):
    """classifier="tm" is --classifier tm: CFLOWS without the learned index."""
    ours = rqvs.replay(design="cflows", classifier="tm")
    theirs = run_cli(cli, "replay", "--design", "cflows", "--classifier", "tm")
    assert ours["classifier"] == "tm" and ours["counters"]["model_hit"] == 0 and ours["mismatches"] == 0
    same_report(ours, theirs)
    assert rqvs.replay(design="cflows")["classifier"] == "nmu" and rqvs.replay(design="orig")["classifier"] is None
    for bad, message in [
        (dict(design="orig", classifier="tm"), "--classifier: CFLOWS' classifier; not used by --design orig"),
        (dict(design="cflows", classifier="tm", policy="delayed"),
         "--classifier tm: TupleMerge alone has no model for the delayed policy to wait for (use --policy instant)"),
        (dict(design="cflows", classifier="nm"), "classifier: expected 'nmu' or 'tm', found 'nm'"),
    ]:
        with pytest.raises(ValueError) as e:
            rqvs.replay(**bad)
        assert str(e.value) == message


def test_defences_against_tuple_space_explosion(cli):
    """mask_limit, mask_eviction and mfcguard are --mask-limit, --mask-eviction and --mfcguard."""
    ours = rqvs.replay(design="orig", mask_limit=3, mfcguard=True, revalidator="inline")
    theirs = run_cli(cli, "replay", "--design", "orig", "--mask-limit", "3", "--mfcguard", "--revalidator", "inline")
    assert ours["counters"]["masks"] <= 3 and ours["counters"]["install_mask_narrowed"] > 0 and ours["mismatches"] == 0
    assert (ours["mask_limit"], ours["mask_eviction"], ours["mfcguard_s"]) == (3, "narrow", 0.5)
    evicting = rqvs.replay(mask_limit=3, mask_eviction="least-hit")
    assert evicting["counters"]["masks_evicted"] > 0 and evicting["mask_eviction"] == "least-hit"
    same_report(ours, theirs)
    refused = rqvs.replay(design="ccache", mask_limit=2, mask_eviction="refuse", mfcguard=True, mfcguard_interval=0.1)
    assert refused["counters"]["install_mask_refused"] > 0 and refused["mfcguard_s"] == 0.1
    defence = "a defence of ORIG's and CCACHE's megaflow cache; not used by --design cflows"
    for bad, message in [
        (dict(design="cflows", mask_limit=4), f"--mask-limit: the mask limit, {defence}"),
        (dict(design="cflows", mfcguard=True), f"--mfcguard: MFCGuard, {defence}"),
        (dict(mask_limit=0), "--mask-limit: expected at least 1 mask"),
        (dict(mask_eviction="refuse"), "--mask-eviction: the policy at the mask limit; expected --mask-limit"),
        (dict(mask_eviction="narrow"), "--mask-eviction: the policy at the mask limit; expected --mask-limit"),
        (dict(mask_limit=2, mask_eviction="random"), "mask_eviction: expected 'least-hit', 'refuse' or 'narrow', found 'random'"),
        (dict(mfcguard_interval=1.0), "mfcguard_interval: MFCGuard's interval; expected mfcguard=True"),
        (dict(mfcguard=True, mfcguard_interval=0.0), "--mfcguard: expected an interval > 0 s, found '0'"),
    ]:
        with pytest.raises(ValueError) as e:
            rqvs.replay(**bad)
        assert str(e.value) == message


def test_replay_with_an_attack(cli, tmp_path):
    """attack/attack_rate are --attack/--attack-rate: the report separates the streams."""
    attack = tmp_path / "attack.pcap"
    subprocess.run(
        [str(cli), "gen", "trace", "--rules", str(REPO / "crates/experiment/data/acl1_1k_rules.xz"), "--packets", "2000",
         "--locality", "uniform", "--corner", "--format", "pcap", "-o", str(attack)],
        check=True, capture_output=True,
    )
    ours = rqvs.replay(design="orig", attack=str(attack), attack_rate=1e6, revalidator="inline")
    theirs = run_cli(cli, "replay", "--design", "orig", "--attack", str(attack), "--attack-rate", "1e6", "--revalidator", "inline")
    a = ours["attack"]
    assert a["mismatches"] == 0 and a["verified"] > 0 and ours["mismatches"] == 0
    assert a["benign"]["packets"] + a["attack"]["packets"] == ours["packets"]
    assert keys(ours) == keys(theirs) and set(a) == set(theirs["attack"])
    for bad, message in [
        (dict(attack=str(attack)), "--attack: expected --attack-rate PPS too"),
        (dict(attack_rate=1e5), "--attack-rate: the rate of an attack; expected --attack FILE"),
        (dict(attack=str(attack), attack_rate=-1.0), "--attack-rate: expected packets per second > 0, found '-1'"),
        (dict(attack_policing="10"), "--attack-policing: polices an attack's queue; expected --attack FILE"),
        (dict(attack=str(attack), attack_rate=1e5, attack_policing="10/0"),
         "attack_policing: expected KPPS[/BURST] with BURST a number in 0.001..1e9 thousand packets, found '10/0'"),
    ]:
        with pytest.raises(ValueError) as e:
            rqvs.replay(**bad)
        assert str(e.value) == message
    # attack_policing is --attack-policing: the packets over the bucket are dropped before the
    # classifier, in both reports alike.
    policed = rqvs.replay(design="cflows", attack=str(attack), attack_rate=1e6, attack_policing="10/0.2")
    p = policed["attack"]
    assert p["policing"] == {"kpps": 10.0, "burst_kpkts": 0.2} and p["policed"] > 0 and policed["mismatches"] == 0
    assert p["attack"]["packets"] + p["ring_dropped"] + p["policed"] + p["waiting"] == p["offered"]


def test_gen_attack(cli, tmp_path):
    """gen_attack is `rqvs gen attack`: the same pcap and report, errors in its words."""
    ours = rqvs.gen_attack(DEFAULT_RULES, "tse2", 2000, tmp_path / "ours.pcap", masks=30, rng_seed=4)
    theirs = run_cli(cli, "gen", "attack", "--rules", str(DEFAULT_RULES), "--kind", "tse2", "--packets", "2000",
                     "--masks", "30", "--rng-seed", "4", "-o", str(tmp_path / "theirs.pcap"))
    assert ours["orig"]["masks"] == 30 and ours["orig"]["mismatches"] == 0
    assert (tmp_path / "ours.pcap").read_bytes() == (tmp_path / "theirs.pcap").read_bytes()
    same_report(ours, theirs)
    general = rqvs.gen_attack(DEFAULT_RULES, "tse", 2000, tmp_path / "g.pcap", variant="general")
    assert general["knowledge"] == "general"
    for bad, message in [
        (dict(kind="tsx"), "kind: expected 'tse', 'tse2' or 'flood', found 'tsx'"),
        (dict(kind="tse", variant="local"), "variant: expected 'co-located' or 'general', found 'local'"),
        (dict(kind="tse", packets=0), "--packets: expected at least 1"),
    ]:
        args = dict(rules=DEFAULT_RULES, kind="tse", packets=10, output=tmp_path / "x.pcap")
        args.update(bad)
        with pytest.raises(ValueError) as e:
            rqvs.gen_attack(**args)
        assert str(e.value) == message


def test_auto_settings(cli):
    """auto= is --auto: a dict or the command line's string, parsed by the same parser."""
    ours = rqvs.replay(design="auto", auto={"initial": "orig", "window-ms": 50})
    theirs = run_cli(cli, "replay", "--design", "auto", "--auto", "initial=orig,window-ms=50")
    assert ours["auto"]["settings"] == {"initial": "orig", "window-ms": "50"} == theirs["auto"]["settings"]
    assert ours["auto"]["time_orig_s"] > 0 and ours["auto"]["time_cflows_s"] == 0 and ours["mismatches"] == 0
    for r in (ours, theirs):  # PMD time: differs between runs
        r["auto"].pop("time_orig_s")
    same_report(ours, theirs)
    assert rqvs.replay(design="auto")["auto"]["settings"] == {}
    as_text = rqvs.replay(design="auto", auto="initial=orig,ccache=false,min-dwell-ms=0.5")
    assert as_text["auto"]["settings"] == {"initial": "orig", "ccache": "false", "min-dwell-ms": "0.5"}
    assert rqvs.replay(design="auto", auto={"ccache": False, "to-cflows-masks": 64})["auto"]["settings"] == {
        "ccache": "false", "to-cflows-masks": "64"}
    both = rqvs.compare(designs=["orig", "auto"], auto={"initial": "orig"})
    assert both["runs"][1]["auto"]["settings"] == {"initial": "orig"} and both["runs"][0]["auto"] is None
    # Not used: word for word the command line's error.
    with pytest.raises(ValueError) as e:
        rqvs.replay(design="cflows", auto={"window-ms": 5})
    assert str(e.value) == cli_error(cli, "replay", "--design", "cflows", "--auto", "window-ms=5", code=2)
    for bad, message in [
        ({"window": 5}, "auto: unknown key 'window' (known: initial, cflows-rules, window-ms,"),
        ({"window-ms": 0}, "auto: window-ms: expected milliseconds 0.001 ≤ x ≤ 3600000, found '0'"),
        ({"to-cflows-upcall-share": 1.5}, "auto: to-cflows-upcall-share: expected a share 0 ≤ x ≤ 1, found '1.5'"),
        ({"ccache": "maybe"}, "auto: ccache: expected true or false, found 'maybe'"),
        ({"initial": "orig,window-ms=5"}, "auto: initial: expected one value, found 'orig,window-ms=5'"),
        ({"initial": "ccache", "ccache": False}, "auto: initial: ccache is not a candidate with ccache=false"),
        ("window-ms=5,window-ms=6", "auto: window-ms: given twice"),
    ]:
        with pytest.raises(ValueError) as e:
            rqvs.replay(design="auto", auto=bad)
        assert str(e.value).startswith(message), str(e.value)
    for bad in [5, {"window-ms": [5]}]:
        with pytest.raises(TypeError, match="replay\\(\\): auto: "):
            rqvs.replay(design="auto", auto=bad)
