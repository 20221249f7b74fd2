"""Bad input raises a Python exception with the command line's one-line message, never aborts.

Where the command line reads the same input (a rule file, a trace, a seed file) the message is
compared with what `rqvs` prints after `rqvs: error: `; rules given as lines are named
`<rules>`/`<rule>` where the command line names the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rqvs
from conftest import cli_error

REPO = Path(__file__).resolve().parents[2]
DEFAULT_RULES = REPO / "data" / "default" / "acl1_1k_rules.xz"
GOOD = "@1.2.3.0/24\t5.6.7.8/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000"
# Column 21: the destination prefix length.
BAD = "@1.2.3.4/32\t5.6.7.8/33\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000"


@pytest.fixture()
def bad_rules(tmp_path) -> Path:
    p = tmp_path / "bad_rules.txt"
    p.write_text(GOOD + "\n" + BAD + "\n")
    return p


@pytest.fixture()
def tm() -> rqvs.Classifier:
    return rqvs.Classifier.from_rules([GOOD], kind="tm")


def test_missing_rule_file_is_oserror_with_cli_message(cli, tmp_path):
    missing = tmp_path / "missing.txt"
    with pytest.raises(OSError) as e:
        rqvs.Classifier.from_file(missing, kind="tm")
    assert str(e.value) == cli_error(cli, "classify", "--rules", str(missing), "--classifier", "tm")
    with pytest.raises(OSError) as e:
        rqvs.LiveNuevoMatch.from_file(missing)
    assert str(e.value) == cli_error(cli, "classify", "--rules", str(missing))


def test_malformed_rule_file_is_valueerror_with_cli_message(cli, bad_rules):
    want = cli_error(cli, "classify", "--rules", str(bad_rules))
    assert want.startswith(f"{bad_rules}:2:21: expected destination prefix length")
    for kind in rqvs.CLASSIFIERS:
        with pytest.raises(ValueError) as e:
            rqvs.Classifier.from_file(bad_rules, kind=kind)
        assert str(e.value) == want


def test_malformed_rule_lines_name_the_line(cli, bad_rules):
    want = cli_error(cli, "classify", "--rules", str(bad_rules))
    with pytest.raises(ValueError) as e:
        rqvs.Classifier.from_rules([GOOD, BAD], kind="tm")
    assert str(e.value) == want.replace(str(bad_rules), "<rules>", 1)
    with pytest.raises(ValueError) as e:
        rqvs.LiveNuevoMatch.from_rules([GOOD, BAD])
    assert str(e.value) == want.replace(str(bad_rules), "<rules>", 1)


def test_malformed_insert_is_valueerror_and_changes_nothing(cli, bad_rules, tm):
    want = cli_error(cli, "classify", "--rules", str(bad_rules))
    with pytest.raises(ValueError) as e:
        tm.insert(BAD)
    assert str(e.value) == want.replace(f"{bad_rules}:2:", "<rule>:1:", 1)
    for bad, msg in [
        ("", "<rule>:1:1: expected a rule, found an empty line"),
        (GOOD + "\n" + GOOD, "<rule>:1:1: expected one rule on one line, found a newline"),
        ("tcp,tp_dst=80,actions=bogus(", None),
        ("ip,nw_src=1.2.3.4/40,actions=drop", None),
    ]:
        with pytest.raises(ValueError) as e:
            tm.insert(bad)
        if msg:
            assert str(e.value) == msg
        else:
            assert str(e.value).startswith("<rule>:1:")
    assert len(tm) == 1


def test_duplicate_id_and_missing_id(tm):
    with pytest.raises(ValueError, match="^rule id 0 is already present$"):
        tm.insert(GOOD, id=0)
    with pytest.raises(KeyError, match="rule id 7 is not present"):
        tm.remove(7)
    tm.remove(0)
    with pytest.raises(KeyError):
        tm.remove(0)
    with pytest.raises(OverflowError):
        tm.remove(-1)


def test_unknown_kind_and_policy():
    with pytest.raises(ValueError, match="^unknown classifier 'tuplemerge' \\(known: ref, tss, tm, ofproto, nmu"):
        rqvs.Classifier.from_rules([GOOD], kind="tuplemerge")
    with pytest.raises(ValueError, match="policy"):
        rqvs.LiveNuevoMatch.from_rules([GOOD], policy="lazy")
    with pytest.raises(ValueError, match="retrain_threshold"):
        rqvs.LiveNuevoMatch.from_rules([GOOD], retrain_threshold=2.0)
    with pytest.raises(TypeError):
        rqvs.Classifier.from_rules(GOOD, kind="tm")  # a string, not a list of lines


def test_traces(cli, tmp_path):
    missing = tmp_path / "missing.trace"
    with pytest.raises(OSError) as e:
        rqvs.read_trace(missing)
    assert str(e.value) == cli_error(cli, "classify", "--trace", str(missing))
    bad = tmp_path / "bad.trace"
    bad.write_text("1 2 3\n")
    with pytest.raises(ValueError) as e:
        rqvs.read_trace(bad)
    assert str(e.value) == cli_error(cli, "classify", "--trace", str(bad))
    assert str(e.value).startswith(f"{bad}:1:6: expected destination port")
    truncated = tmp_path / "truncated.pcap"
    truncated.write_bytes(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000") + b"\x01\x02")
    with pytest.raises(ValueError) as e:
        rqvs.read_trace(truncated)
    assert str(e.value) == cli_error(cli, "classify", "--trace", str(truncated))


def test_headers_of_the_wrong_type_or_dtype(tm):
    for h, msg in [
        ([[1, 2, 3, 4, 5]], "headers: expected a numpy array"),
        (np.zeros((3, 5), dtype=np.float64), "headers: expected dtype uint32 (or a structured array with rqvs.HEADER_DTYPE's fields), found float64"),
        (np.zeros((3, 5), dtype=np.int64), "found int64"),
        (np.zeros((3, 5), dtype=np.uint16), "found uint16"),
        (np.zeros(3, dtype=[("nw_src", np.float32)]), "headers: field 'nw_src' has dtype float32, expected an integer dtype in native byte order"),
        (np.zeros(3, dtype=[("nw_src", ">u4")]), "headers: field 'nw_src' has dtype >u4"),
        (np.zeros(3, dtype=[("nw_src", np.uint32, (2,))]), "headers: field 'nw_src'"),
    ]:
        with pytest.raises(TypeError) as e:
            tm.classify(h)
        assert msg in str(e.value), str(e.value)


def test_headers_of_the_wrong_shape_or_values(tm):
    for h, msg in [
        (np.zeros((3, 4), dtype=np.uint32), "headers: expected shape (n, 5) to (n, 11), columns nw_src, nw_dst, tp_src, tp_dst, nw_proto, tcp_flags, in_port, dl_type, vlan_tci, nw_tos, nw_frag; found shape (3, 4)"),
        (np.zeros((3, 12), dtype=np.uint32), "found shape (3, 12)"),
        (np.zeros(5, dtype=np.uint32), "found shape (5,)"),
        (np.zeros((2, 3, 5), dtype=np.uint32), "found shape (2, 3, 5)"),
        (np.zeros((2, 2), dtype=rqvs.HEADER_DTYPE), "headers: expected a 1-D structured array, found shape (2, 2)"),
        (np.zeros(2, dtype=[("src", np.uint32)]), "headers: unknown field 'src' (known: nw_src, nw_dst,"),
        (np.array([[1, 2, 3, 70000, 6]], dtype=np.uint32), "headers[0, 3]: tp_dst 70000 is out of range 0..65535"),
        (np.array([[1, 2, 3, 4, 256]], dtype=np.uint32), "headers[0, 4]: nw_proto 256 is out of range 0..255"),
        (np.array([[0, 0, 0, 0, 6, 0x1000]], dtype=np.uint32), "headers[0, 5]: tcp_flags 4096 is out of range 0..4095"),
        (np.array([(1, -1)], dtype=[("nw_src", np.uint32), ("tp_src", np.int32)]), "headers[0]: tp_src -1 is out of range 0..65535"),
        (np.array([(1, 1 << 48)], dtype=[("nw_src", np.uint32), ("dl_src", np.uint64)]), "headers[0]: dl_src 281474976710656 is out of range 0..281474976710655"),
    ]:
        with pytest.raises(ValueError) as e:
            tm.classify(h)
        assert msg in str(e.value), str(e.value)


def test_experiments(cli, tmp_path, bad_rules):
    missing = tmp_path / "missing.txt"
    with pytest.raises(OSError) as e:
        rqvs.replay(rules=missing)
    assert str(e.value) == cli_error(cli, "replay", "--rules", str(missing))
    with pytest.raises(ValueError) as e:
        rqvs.compare(rules=bad_rules)
    assert str(e.value) == cli_error(cli, "compare", "--rules", str(bad_rules))
    with pytest.raises(ValueError) as e:
        rqvs.replay(updates="garbage")
    assert str(e.value) == cli_error(cli, "replay", "--updates", "garbage")
    with pytest.raises(ValueError) as e:
        rqvs.gen_trace(DEFAULT_RULES, 10, tmp_path / "t", locality="foo")
    assert str(e.value) == cli_error(cli, "gen", "trace", "--rules", str(DEFAULT_RULES), "--packets", "10", "--locality", "foo", "-o", str(tmp_path / "t"))
    with pytest.raises(OSError) as e:
        rqvs.gen_trace(DEFAULT_RULES, 10, tmp_path / "no" / "t")
    assert str(e.value) == cli_error(cli, "gen", "trace", "--rules", str(DEFAULT_RULES), "--packets", "10", "-o", str(tmp_path / "no" / "t"))
    with pytest.raises(OSError) as e:
        rqvs.gen_rules(str(tmp_path / "no_seed"), 10, tmp_path / "r")
    assert str(e.value) == cli_error(cli, "gen", "rules", "--seed-file", str(tmp_path / "no_seed"), "--count", "10", "-o", str(tmp_path / "r"))
    with pytest.raises(ValueError, match="unknown design 'fast'"):
        rqvs.replay(design="fast")
    with pytest.raises(ValueError, match="--designs: expected at least one design"):
        rqvs.compare(designs=[])
    with pytest.raises(TypeError, match="unexpected keyword argument 'passe'"):
        rqvs.replay(passe=2)
    with pytest.raises(TypeError, match="passes"):
        rqvs.replay(passes="two")
    with pytest.raises(ValueError, match="format"):
        rqvs.gen_trace(DEFAULT_RULES, 10, tmp_path / "t", format="csv")
