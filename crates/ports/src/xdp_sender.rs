//! The XDP engine of the traffic generator (`rqvs send --engine xdp`): frames made by the
//! kernel itself, with no socket buffer on the sending side, through `BPF_PROG_TEST_RUN` with
//! `BPF_F_TEST_XDP_LIVE_FRAMES` (Linux 5.18+) — the method of the kernel's own XDP traffic
//! generators.
//!
//! **How.** A small XDP program (hand-assembled below, like the AF_XDP port's) is run by the
//! kernel `repeat` times per system call on a frame of its own page pool; each run reads a
//! counter (a one-entry array map), takes frame `counter mod n` from a second array map holding
//! the capture's frames (written once, at open), sizes the frame to it
//! (`bpf_xdp_adjust_tail`), copies it in (`bpf_xdp_store_bytes`) and returns `XDP_TX`, which in
//! this mode sends the frame out of the interface the run is bound to. The frames go in the
//! capture's order, looping, exactly as the TX ring engine ([`crate::sender`]) sends them.
//!
//! **Cheap calls.** The kernel puts a program into its XDP dispatcher for every such call and
//! takes it out again afterwards, each time waiting for an RCU grace period — tens of
//! milliseconds per call on a small VM — unless the dispatcher already holds it because it is
//! attached to an interface. So [`XdpSender::open`] attaches the program to the sending
//! interface itself, in generic mode, until the sender is dropped: the frames the engine makes
//! carry 8 bytes of metadata ("rqvsSEND") that the program checks and strips, and every frame
//! the interface receives (no such metadata) is passed on untouched. An interface that already
//! has an XDP program refuses it; the engine then still works, with slow calls
//! ([`XdpSender::attached`] says which). On a NIC, note that the kernel turns off LRO and
//! hardware GRO when any generic-mode program is attached, and does not turn them back on.
//!
//! **What the peer needs.** A frame sent this way is an `xdp_frame`, not an skb: a veth hands it
//! to its peer's XDP ring, which exists only while the peer has an XDP program attached (as an
//! `afxdp` port attaches one) or GRO enabled (`ethtool -K PEER gro on`); without either, the
//! veth drops every frame and counts nothing on the sending side. The sending interface's
//! `tx_packets` does not count these frames either (a veth counts them on the peer's receive
//! side): the report's frames are the runs the kernel made, and what arrived is the receiver's
//! count.
//!
//! Limits: each frame at most [`MAX_FRAME`] bytes (one page holds the frame, its headroom and the
//! kernel's tail info), the frames together at most [`MAX_BYTES`] in the map.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::PortError;
use crate::sender::{SendOptions, SendReport};
use crate::sys::{self, BpfInsn, BPF_PROG_TYPE_XDP, BPF_XDP, XDP_DROP, XDP_FLAGS_SKB_MODE, XDP_PASS, XDP_TX};

/// The longest frame the XDP engine sends.
pub const MAX_FRAME: usize = 3000;
/// The most bytes of frames (with an 8-byte length each, padded to the longest) held in the map.
pub const MAX_BYTES: usize = 512 << 20;

const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_FUNC_XDP_ADJUST_TAIL: i32 = 65;
const BPF_FUNC_XDP_GET_BUFF_LEN: i32 = 188;
const BPF_FUNC_XDP_STORE_BYTES: i32 = 190;
const BPF_FUNC_XDP_ADJUST_META: i32 = 54;
/// The 8 bytes of metadata in front of every frame the engine makes ("rqvsSEND"): the program
/// turns only such frames into the capture's, and passes everything else untouched.
const MAGIC: u64 = u64::from_be_bytes(*b"rqvsSEND");
/// Frames per live-frames batch inside the kernel (its default). A veth's peer takes at most 256
/// frames between two of its NAPI polls, which run — unless the peer's NAPI is threaded — in
/// this CPU's softirq, after a batch: batches of 256 lost 9 of 1,500 frames paced at 50 Kpps.
const KERNEL_BATCH: u32 = 64;

/// The program (module docs). `counter`, `frames`: the maps' descriptors; `n` frames, each
/// value `8 + max_len` bytes (the length as a u32 at 0, the frame at 8).
fn program(counter: i32, frames: i32, n: u32, max_len: u32) -> Vec<BpfInsn> {
    const MOV64_X: u8 = 0xbf;
    const MOV64_K: u8 = 0xb7;
    const ADD64_K: u8 = 0x07;
    const SUB64_X: u8 = 0x1f;
    const MOD64_K: u8 = 0x97;
    const ST_MEM_W: u8 = 0x62;
    const STX_MEM_W: u8 = 0x63;
    const STX_MEM_DW: u8 = 0x7b;
    const LDX_MEM_W: u8 = 0x61;
    const LDX_MEM_DW: u8 = 0x79;
    const LD_IMM64: u8 = 0x18;
    const JEQ_K: u8 = 0x15;
    const JNE_K: u8 = 0x55;
    const JGT_K: u8 = 0x25;
    const JLT_K: u8 = 0xa5;
    const CALL: u8 = 0x85;
    const EXIT: u8 = 0x95;
    const PSEUDO_MAP_FD: u8 = 1;
    let i = |code: u8, dst: u8, src: u8, off: i16, imm: i32| BpfInsn { code, regs: dst | src << 4, off, imm };
    // Jumps to `drop` are patched once its index is known.
    const DROP: i16 = i16::MIN;
    const JNE_X: u8 = 0x5d;
    const JGT_X: u8 = 0x2d;
    // Jumps to `pass` likewise.
    const PASS: i16 = i16::MIN + 1;
    let magic = [i(LD_IMM64, 5, 0, 0, MAGIC as u32 as i32), i(0, 0, 0, 0, (MAGIC >> 32) as u32 as i32)];
    let mut p = vec![
        i(MOV64_X, 6, 1, 0, 0), // r6 = ctx
        // Only the engine's own frames (MAGIC in 8 bytes of metadata) go on; the interface's
        // received frames, while the program is attached to it (XdpSender::open), pass.
        i(LDX_MEM_W, 2, 6, 8, 0), // r2 = data_meta
        i(LDX_MEM_W, 3, 6, 0, 0), // r3 = data
        i(MOV64_X, 4, 2, 0, 0),
        i(ADD64_K, 4, 0, 0, 8),
        i(JGT_X, 4, 3, PASS, 0), // less than 8 bytes of metadata
        i(LDX_MEM_DW, 4, 2, 0, 0),
        magic[0],
        magic[1],
        i(JNE_X, 4, 5, PASS, 0),
        // bpf_xdp_adjust_meta(ctx, 8): the metadata goes before the frame is sent
        i(MOV64_X, 1, 6, 0, 0),
        i(MOV64_K, 2, 0, 0, 8),
        i(CALL, 0, 0, 0, BPF_FUNC_XDP_ADJUST_META),
        i(JNE_K, 0, 0, DROP, 0),
        // r0 = &counter[0]
        i(ST_MEM_W, 10, 0, -4, 0),
        i(MOV64_X, 2, 10, 0, 0),
        i(ADD64_K, 2, 0, 0, -4),
        i(LD_IMM64, 1, PSEUDO_MAP_FD, 0, counter),
        i(0, 0, 0, 0, 0),
        i(CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM),
        i(JEQ_K, 0, 0, DROP, 0),
        // r7 = counter++ mod n
        i(LDX_MEM_DW, 7, 0, 0, 0),
        i(MOV64_X, 8, 7, 0, 0),
        i(ADD64_K, 8, 0, 0, 1),
        i(STX_MEM_DW, 0, 8, 0, 0),
        i(MOD64_K, 7, 0, 0, n as i32),
        // r9 = &frames[r7]
        i(STX_MEM_W, 10, 7, -8, 0),
        i(MOV64_X, 2, 10, 0, 0),
        i(ADD64_K, 2, 0, 0, -8),
        i(LD_IMM64, 1, PSEUDO_MAP_FD, 0, frames),
        i(0, 0, 0, 0, 0),
        i(CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM),
        i(JEQ_K, 0, 0, DROP, 0),
        i(MOV64_X, 9, 0, 0, 0),
        // r7 = the frame's length, bounded for the verifier: 14 ..= max_len
        i(LDX_MEM_W, 7, 9, 0, 0),
        i(JGT_K, 7, 0, DROP, max_len as i32),
        i(JLT_K, 7, 0, DROP, 14),
        // r8 = the buffer's length now
        i(MOV64_X, 1, 6, 0, 0),
        i(CALL, 0, 0, 0, BPF_FUNC_XDP_GET_BUFF_LEN),
        i(MOV64_X, 8, 0, 0, 0),
        // bpf_xdp_adjust_tail(ctx, len - now)
        i(MOV64_X, 2, 7, 0, 0),
        i(SUB64_X, 2, 8, 0, 0),
        i(MOV64_X, 1, 6, 0, 0),
        i(CALL, 0, 0, 0, BPF_FUNC_XDP_ADJUST_TAIL),
        i(JNE_K, 0, 0, DROP, 0),
        // bpf_xdp_store_bytes(ctx, 0, &frame[8], len)
        i(MOV64_X, 1, 6, 0, 0),
        i(MOV64_K, 2, 0, 0, 0),
        i(MOV64_X, 3, 9, 0, 0),
        i(ADD64_K, 3, 0, 0, 8),
        i(MOV64_X, 4, 7, 0, 0),
        i(CALL, 0, 0, 0, BPF_FUNC_XDP_STORE_BYTES),
        i(JNE_K, 0, 0, DROP, 0),
        i(MOV64_K, 0, 0, 0, XDP_TX),
        i(EXIT, 0, 0, 0, 0),
    ];
    let drop = p.len();
    p.push(i(MOV64_K, 0, 0, 0, XDP_DROP));
    p.push(i(EXIT, 0, 0, 0, 0));
    let pass = p.len();
    p.push(i(MOV64_K, 0, 0, 0, XDP_PASS));
    p.push(i(EXIT, 0, 0, 0, 0));
    for (at, insn) in p.iter_mut().enumerate() {
        if insn.off == DROP {
            insn.off = (drop - at - 1) as i16;
        } else if insn.off == PASS {
            insn.off = (pass - at - 1) as i16;
        }
    }
    p
}

/// The XDP engine, bound to one interface, holding the frames to send (module docs).
pub struct XdpSender {
    iface: String,
    ifindex: u32,
    prog: OwnedFd,
    _maps: [OwnedFd; 2],
    /// The template the kernel's page pool starts each frame from: [`MAGIC`] as 8 bytes of
    /// metadata, then the first frame.
    template: Vec<u8>,
    /// The program attached to the interface in generic mode for as long as the sender lives
    /// (`None` if the interface would not take it); see [`XdpSender::open`].
    kept: Option<OwnedFd>,
    n: usize,
    /// `upto[k]`: the bytes of frames `0..k` of the capture (`n + 1` entries).
    upto: Vec<u64>,
}

impl std::fmt::Debug for XdpSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpSender").field("iface", &self.iface).field("frames", &self.n).finish()
    }
}

impl XdpSender {
    /// Loads the program and the frames (at least one, each 14..=[`MAX_FRAME`] bytes) for
    /// `iface` in this network namespace.
    pub fn open(iface: &str, frames: &[Vec<u8>]) -> Result<XdpSender, PortError> {
        if frames.is_empty() {
            return Err(PortError::Spec(format!("{iface}: no frames to send")));
        }
        if let Some((i, f)) = frames.iter().enumerate().find(|(_, f)| f.len() < 14 || f.len() > MAX_FRAME) {
            return Err(PortError::Spec(format!(
                "{iface}: frame {} is {} bytes; the XDP engine sends frames of 14 to {MAX_FRAME} bytes",
                i + 1,
                f.len()
            )));
        }
        let max_len = frames.iter().map(Vec::len).max().unwrap_or(0).next_multiple_of(8);
        let value = 8 + max_len;
        if frames.len().saturating_mul(value) > MAX_BYTES || frames.len() > i32::MAX as usize {
            return Err(PortError::Spec(format!(
                "{iface}: {} frames of up to {max_len} bytes need {} MiB in the kernel; the XDP engine holds at most {} MiB",
                frames.len(),
                (frames.len() * value) >> 20,
                MAX_BYTES >> 20
            )));
        }
        let err = |op: &str| {
            let op = op.to_string();
            move |e: std::io::Error| PortError::os(iface, &op, e)
        };
        let probe = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0).map_err(err("socket"))?;
        let ifindex = sys::interface_index(&probe, iface).map_err(err("interface index"))?;
        let counter = sys::bpf_map_create(BPF_MAP_TYPE_ARRAY, 4, 8, 1, "rqvs_send_i").map_err(err("counter map"))?;
        let map = sys::bpf_map_create(BPF_MAP_TYPE_ARRAY, 4, value as u32, frames.len() as u32, "rqvs_send_f")
            .map_err(err("frames map"))?;
        let mut v = vec![0u8; value];
        for (k, f) in frames.iter().enumerate() {
            v.fill(0);
            v[..4].copy_from_slice(&(f.len() as u32).to_ne_bytes());
            v[8..8 + f.len()].copy_from_slice(f);
            sys::bpf_map_update(&map, &(k as u32).to_ne_bytes(), &v).map_err(err("frames map update"))?;
        }
        let insns = program(counter.as_raw_fd(), map.as_raw_fd(), frames.len() as u32, max_len as u32);
        let license = CString::new("GPL").expect("no NUL");
        let prog = sys::bpf_prog_load(BPF_PROG_TYPE_XDP, &insns, &license, BPF_XDP, "rqvs_send")
            .map_err(err("loading the XDP sender program"))?;
        // Each BPF_PROG_TEST_RUN call puts the program into the kernel's XDP dispatcher and takes
        // it out again, two waits for an RCU grace period: 24-37 ms a call here, whatever its
        // size, which held a paced run to ~9 Kpps. A program the dispatcher already holds (one
        // attached to an interface) costs nothing there, so the program stays attached to the
        // sending interface itself in generic mode while the sender lives; it passes every frame
        // the interface receives (they carry no MAGIC). An interface with another program
        // attached refuses it: the sender then runs with the slow calls.
        let kept = sys::bpf_link_create(&prog, ifindex, BPF_XDP, XDP_FLAGS_SKB_MODE).ok();
        let mut template = MAGIC.to_ne_bytes().to_vec();
        template.extend_from_slice(&frames[0]);
        Ok(XdpSender {
            iface: iface.to_string(),
            ifindex,
            prog,
            _maps: [counter, map],
            template,
            kept,
            n: frames.len(),
            upto: std::iter::once(0)
                .chain(frames.iter().scan(0u64, |acc, f| {
                    *acc += f.len() as u64;
                    Some(*acc)
                }))
                .collect(),
        })
    }

    /// Whether the program stayed attached to the interface, so that calls are cheap (see
    /// [`XdpSender::open`]).
    pub fn attached(&self) -> bool {
        self.kept.is_some()
    }

    /// Sends the frames in order, looping, until a limit of `opts` or `stop`.
    ///
    /// At top speed each system call asks for as many frames as take about 100 ms, so that
    /// even calls that wait for the dispatcher (module docs: an interface that would not keep
    /// the program) spend most of their time making frames; a call never asks for more than the
    /// duration has left at the rate measured so far. Paced runs call for at most 256 frames at
    /// a time.
    pub fn run(&mut self, opts: &SendOptions, stop: &AtomicBool) -> Result<SendReport, PortError> {
        let mut report = SendReport::default();
        let start = Instant::now();
        let limit = opts.count.unwrap_or(u64::MAX);
        let mut sent = 0u64;
        let mut burst = FIRST_CALL;
        while sent < limit && !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let elapsed = now.duration_since(start);
            if opts.duration.is_some_and(|d| elapsed >= d) {
                break;
            }
            let budget = match opts.pps {
                Some(pps) => ((elapsed.as_secs_f64() * pps) as u64 + 1).saturating_sub(sent).min(256),
                None => call_size(burst, sent, elapsed, opts.duration),
            }
            .min(limit - sent);
            if budget == 0 {
                std::thread::sleep(Duration::from_micros(50));
                continue;
            }
            sys::bpf_xdp_live_frames(&self.prog, &self.template, META, self.ifindex, budget as u32, KERNEL_BATCH)
                .map_err(|e| PortError::os(&self.iface, "BPF_PROG_TEST_RUN (XDP live frames)", e))?;
            report.kicks += 1;
            if budget == burst && now.elapsed() < CALL_TIME / 2 {
                burst = (burst * 2).min(LAST_CALL);
            }
            report.bytes += bytes_of(&self.upto, sent, budget);
            sent += budget;
        }
        report.frames = sent;
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// The bytes of `count` frames from the `from`-th sent on, `upto[k]` being the bytes of frames
/// `0..k` of the capture: the counter advances one per run, so frame `(from + j) mod n` went
/// j-th. Whole passes over the capture at once: a top-speed call is millions of frames.
fn bytes_of(upto: &[u64], from: u64, count: u64) -> u64 {
    let n = (upto.len() - 1) as u64;
    let at = |k: u64| upto[k as usize];
    let (start, rest) = (from % n, count % n);
    let tail = if start + rest <= n { at(start + rest) - at(start) } else { at(n) - at(start) + at(start + rest - n) };
    count / n * at(n) + tail
}

/// Bytes of metadata in front of the template (the kernel's limit is 32, a multiple of 4).
const META: usize = 8;

/// About how long one top-speed system call runs (see [`XdpSender::run`]).
const CALL_TIME: Duration = Duration::from_millis(100);
/// Frames in the first top-speed call; each call that ran under half of [`CALL_TIME`] doubles it.
const FIRST_CALL: u64 = 1 << 14;
/// The most frames one call asks for.
const LAST_CALL: u64 = 1 << 24;

/// Frames for the next top-speed call: `burst`, but no more than the rest of `duration` holds at
/// the rate so far (`sent` frames in `elapsed`), and at least [`FIRST_CALL`].
fn call_size(burst: u64, sent: u64, elapsed: Duration, duration: Option<Duration>) -> u64 {
    let Some(d) = duration else { return burst };
    let secs = elapsed.as_secs_f64();
    if sent == 0 || secs <= 0.0 {
        return burst;
    }
    let left = (d.saturating_sub(elapsed).as_secs_f64() * sent as f64 / secs) as u64;
    burst.min(left.max(FIRST_CALL))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_on_drop_or_pass() {
        let p = program(3, 4, 10, 64);
        let (drop, pass) = (p.len() - 4, p.len() - 2);
        assert_eq!((p[drop].code, p[drop].imm), (0xb7, XDP_DROP));
        assert_eq!((p[pass].code, p[pass].imm), (0xb7, XDP_PASS));
        let jumps: Vec<usize> =
            (0..p.len()).filter(|&k| matches!(p[k].code, 0x15 | 0x55 | 0x25 | 0xa5 | 0x2d | 0x5d)).collect();
        let to = |k: usize| (k as i64 + 1 + i64::from(p[k].off)) as usize;
        let (to_drop, to_pass): (Vec<usize>, Vec<usize>) = jumps.iter().partition(|&&k| to(k) == drop);
        assert_eq!(to_drop.len(), 7, "jumps to drop");
        assert_eq!(to_pass.iter().map(|&k| to(k)).collect::<Vec<_>>(), [pass, pass], "the rest go to pass");
    }

    #[test]
    fn bytes_are_counted_as_the_frames_went() {
        let lens = [60u64, 61, 62, 63, 1500];
        let upto: Vec<u64> = std::iter::once(0)
            .chain(lens.iter().scan(0, |a, l| {
                *a += l;
                Some(*a)
            }))
            .collect();
        for from in 0..12u64 {
            for count in 0..23u64 {
                let want: u64 = (from..from + count).map(|j| lens[(j % 5) as usize]).sum();
                assert_eq!(bytes_of(&upto, from, count), want, "from {from} count {count}");
            }
        }
    }

    #[test]
    fn a_call_never_outlasts_the_duration_by_much() {
        let s = Duration::from_secs;
        // No duration, or nothing measured yet: the burst as it stands.
        assert_eq!(call_size(1 << 20, 0, s(0), Some(s(5))), 1 << 20);
        assert_eq!(call_size(1 << 20, 5_000_000, s(1), None), 1 << 20);
        // 4M frames in 1 s of a 5 s run: 16M would fit, the burst is the limit.
        assert_eq!(call_size(1 << 20, 4_000_000, s(1), Some(s(5))), 1 << 20);
        // 0.1 s left at 4 Mpps: 400K frames.
        assert_eq!(call_size(1 << 22, 4_000_000, Duration::from_millis(900), Some(s(1))), 444_444);
        // At the end, the smallest call.
        assert_eq!(call_size(1 << 22, 4_000_000, s(1), Some(s(1))), FIRST_CALL);
    }
}
