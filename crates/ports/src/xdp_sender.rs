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
use crate::sys::{self, BpfInsn};

/// The longest frame the XDP engine sends.
pub const MAX_FRAME: usize = 3000;
/// The most bytes of frames (with an 8-byte length each, padded to the longest) held in the map.
pub const MAX_BYTES: usize = 512 << 20;

const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_FUNC_XDP_ADJUST_TAIL: i32 = 65;
const BPF_FUNC_XDP_GET_BUFF_LEN: i32 = 188;
const BPF_FUNC_XDP_STORE_BYTES: i32 = 190;
const XDP_DROP: i32 = 1;
const XDP_TX: i32 = 3;
/// Frames per live-frames batch inside the kernel (its default is 64).
const KERNEL_BATCH: u32 = 256;

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
    let mut p = vec![
        i(MOV64_X, 6, 1, 0, 0), // r6 = ctx
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
    for (at, insn) in p.iter_mut().enumerate() {
        if insn.off == DROP {
            insn.off = (drop - at - 1) as i16;
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
    /// The template the kernel's page pool starts each frame from (the first frame).
    template: Vec<u8>,
    n: usize,
    /// Each frame's length, in order.
    lens: Vec<u32>,
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
        let prog = sys::bpf_prog_load(BPF_PROG_TYPE_XDP, &insns, &license, 0, "rqvs_send")
            .map_err(err("loading the XDP sender program"))?;
        Ok(XdpSender {
            iface: iface.to_string(),
            ifindex,
            prog,
            _maps: [counter, map],
            template: frames[0].clone(),
            n: frames.len(),
            lens: frames.iter().map(|f| f.len() as u32).collect(),
        })
    }

    /// Sends the frames in order, looping, until a limit of `opts` or `stop`.
    pub fn run(&mut self, opts: &SendOptions, stop: &AtomicBool) -> Result<SendReport, PortError> {
        const BURST: u64 = 1 << 14;
        let mut report = SendReport::default();
        let start = Instant::now();
        let limit = opts.count.unwrap_or(u64::MAX);
        let mut sent = 0u64;
        while sent < limit && !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if opts.duration.is_some_and(|d| now.duration_since(start) >= d) {
                break;
            }
            let budget = match opts.pps {
                Some(pps) => ((now.duration_since(start).as_secs_f64() * pps) as u64 + 1).saturating_sub(sent).min(256),
                None => BURST,
            }
            .min(limit - sent);
            if budget == 0 {
                std::thread::sleep(Duration::from_micros(50));
                continue;
            }
            sys::bpf_xdp_live_frames(&self.prog, &self.template, self.ifindex, budget as u32, KERNEL_BATCH)
                .map_err(|e| PortError::os(&self.iface, "BPF_PROG_TEST_RUN (XDP live frames)", e))?;
            report.kicks += 1;
            // The counter advances one per run: frame `sent + j mod n` went j-th.
            for j in 0..budget {
                report.bytes += u64::from(self.lens[((sent + j) % self.n as u64) as usize]);
            }
            sent += budget;
        }
        report.frames = sent;
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_to_drop_lands_on_it() {
        let p = program(3, 4, 10, 64);
        let drop = p.len() - 2;
        assert_eq!((p[drop].code, p[drop].imm), (0xb7, XDP_DROP));
        let jumps: Vec<usize> = (0..p.len()).filter(|&k| matches!(p[k].code, 0x15 | 0x55 | 0x25 | 0xa5)).collect();
        assert_eq!(jumps.len(), 6);
        for k in jumps {
            assert_eq!(k as i64 + 1 + i64::from(p[k].off), drop as i64, "jump at {k}");
        }
    }
}
