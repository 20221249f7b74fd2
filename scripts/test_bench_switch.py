#!/usr/bin/env python3
"""Unit tests of bench_switch.py's attack-mode helpers that need no root, namespace or switch:
the classic BPF filter on the destination MAC (run by a small interpreter of the four
instructions it uses), the attack pcap's MAC rewrite, megaflow masks from dpctl/dump-flows
lines, the dl_dst check, the rate parser and the attacker's pacing. Run: python3 scripts/test_bench_switch.py"""
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_switch as bs  # noqa: E402


def run_bpf(prog, frame):
    """Classic BPF for the instructions dmac_filter uses: ld word/half absolute, jeq k, ret k."""
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:  # BPF_LD|BPF_W|BPF_ABS
            if k + 4 > len(frame):
                return 0
            acc = int.from_bytes(frame[k:k + 4], "big")
        elif code == 0x28:  # BPF_LD|BPF_H|BPF_ABS
            if k + 2 > len(frame):
                return 0
            acc = int.from_bytes(frame[k:k + 2], "big")
        elif code == 0x15:  # BPF_JMP|BPF_JEQ|BPF_K
            pc += jt if acc == k else jf
        elif code == 0x06:  # BPF_RET|BPF_K
            return k
        else:
            raise AssertionError(f"unexpected BPF opcode {code:#x}")
        pc += 1


def pcap(frames):
    out = bytearray(b"\xd4\xc3\xb2\xa1" + (2).to_bytes(2, "little") + (4).to_bytes(2, "little") + bytes(8)
                    + (65535).to_bytes(4, "little") + (1).to_bytes(4, "little"))
    for f in frames:
        out += bytes(8) + len(f).to_bytes(4, "little") * 2 + f
    return bytes(out)


class AttackHelpers(unittest.TestCase):
    def test_dmac_filter_splits_exactly(self):
        mac = bs.ATTACK_DMAC
        near = [mac[:5] + bytes([mac[5] ^ 1]), bytes([mac[0] ^ 0x80]) + mac[1:], bytes(6), b"\xff" * 6]
        for equal in (True, False):
            prog = bs.dmac_filter(mac, equal)
            self.assertEqual(bool(run_bpf(prog, mac + bytes(54))), equal)
            for other in near:
                self.assertEqual(bool(run_bpf(prog, other + bytes(54))), not equal, other.hex())

    def test_prepare_attack_rewrites_every_dst_mac_only(self):
        frames = [bytes(range(i, i + 60)) for i in range(3)]
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / "a.pcap"
            src.write_bytes(pcap(frames))
            out, n = bs.prepare_attack(src, Path(d))
            self.assertEqual(n, 3)
            self.assertEqual(bs.pcap_frames_to(out, bs.ATTACK_DMAC), 3)
            self.assertEqual(bs.pcap_frames_to(src, bs.ATTACK_DMAC), 0)
            data, _, recs = bs.pcap_records(out)
            for (off, ln), f in zip(recs, frames):
                self.assertEqual(data[off:off + ln], bs.ATTACK_DMAC + f[6:])
            (Path(d) / "short.pcap").write_bytes(pcap([bytes(10)]))
            with self.assertRaises(SystemExit):
                bs.prepare_attack(Path(d) / "short.pcap", Path(d))

    def test_megaflow_masks(self):
        f = ("recirc_id(0),in_port({p}),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(src={s},dst=78.162.59.75,"
             "proto=6,frag=no),tcp(dst=61400/0xfff8){fl}, packets:122, bytes:7320, used:0.033s, actions:1")
        a = bs.megaflow_mask(f.format(p=2, s="1.2.3.4", fl=",tcp_flags(+syn+ack)"))
        self.assertEqual(a, bs.megaflow_mask(f.format(p=3, s="9.8.7.6", fl=",tcp_flags(-syn+ack)")))
        self.assertNotEqual(a, bs.megaflow_mask(f.format(p=2, s="1.2.3.4", fl=",tcp_flags(-ack)")))
        self.assertNotEqual(a, bs.megaflow_mask(f.format(p=2, s="1.2.3.0/255.255.255.0", fl=",tcp_flags(+syn+ack)")))
        self.assertNotEqual(a, bs.megaflow_mask(f.format(p=2, s="1.2.3.4", fl="")))

    def test_dl_dst_seen_in_both_notations(self):
        self.assertTrue(bs.DL_DST.search("recirc_id(0),in_port(2),eth(src=00:00:00:00:00:00,dst=02:a7:7a:00:00:01)"))
        self.assertTrue(bs.DL_DST.search("recirc_id=0,eth,tcp,in_port=1,dl_dst=02:a7:7a:00:00:01,nw_src=1.2.3.4"))
        self.assertFalse(bs.DL_DST.search("recirc_id(0),eth_type(0x0800),ipv4(src=1.2.3.4,dst=5.6.7.8)"))
        self.assertFalse(bs.DL_DST.search("recirc_id=0,eth,tcp,in_port=1,nw_dst=224.217.74.203,tp_dst=21"))

    def test_parse_rate(self):
        self.assertEqual([bs.parse_rate(x) for x in ("0", "20000", "20k", "1.5k", "1m")],
                         [0, 20000, 20000, 1500, 1000000])
        for bad in ("-1", "x", "0.5", "2e9"):
            with self.assertRaises(ValueError):
                bs.parse_rate(bad)

    def test_attack_pacing(self):
        """The attacker sleeps in bursts of rate/1000 frames (at least 1) unless told to busy-wait;
        the benign sender at top speed gets no pacing options at all."""
        from types import SimpleNamespace as NS
        nano = NS(attack_timer="nano", attack_burst=0)
        self.assertEqual(bs.attack_pacing(nano, 200000), ("--timer=nano", "--pps-multi=200"))
        self.assertEqual(bs.attack_pacing(nano, 500), ("--timer=nano", "--pps-multi=1"))
        self.assertEqual(bs.attack_pacing(NS(attack_timer="nano", attack_burst=7), 200000),
                         ("--timer=nano", "--pps-multi=7"))
        self.assertEqual(bs.attack_pacing(NS(attack_timer="gtod", attack_burst=0), 200000), ())
        cmd = bs.sender_cmd("atk0", "a.pcap", 2000, 5, bs.attack_pacing(nano, 2000))
        self.assertEqual(cmd[-4:], ["--pps=2000", "--timer=nano", "--pps-multi=2", "a.pcap"])
        self.assertNotIn("--timer=nano", bs.sender_cmd("src0", "b.pcap", None, 5, ("--timer=nano",)))


if __name__ == "__main__":
    unittest.main()
