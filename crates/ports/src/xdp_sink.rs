//! A receiver that takes frames as cheaply as a Linux interface can (`rqvs sink`): an XDP
//! program that drops every frame, attached to the interface in driver mode through a
//! `bpf_link`, so a frame costs the receiving side one XDP run — no skb, no stack. It is the
//! far end for measuring a sender (`rqvs send`, tcpreplay) rather than the receiver: what
//! arrived is the interface's `rx_packets`, which on a veth counts every frame its XDP program
//! saw, dropped or not.
//!
//! On a veth the receive work runs in the peer's NAPI poll, by default in the softirq of the
//! *sending* CPU; `echo 1 > /sys/class/net/IFACE/threaded` moves it to a kernel thread
//! (`napi/IFACE-…`) that can be pinned to another CPU (docs/switch-bench.md). A skb sent into the
//! veth takes the NAPI path only when the sending side has no TSO (`ethtool -K PEER tso off`), or
//! it is received in the sender's softirq whatever is set here.
//!
//! The program stays attached while the [`XdpSink`] lives; dropping it (or the process dying)
//! closes the link and detaches it.

use std::ffi::CString;
use std::os::fd::OwnedFd;

use crate::error::PortError;
use crate::sys::{self, BpfInsn, BPF_PROG_TYPE_XDP, BPF_XDP, XDP_DROP, XDP_FLAGS_DRV_MODE};

/// An XDP_DROP program attached to one interface (module docs).
#[derive(Debug)]
pub struct XdpSink {
    iface: String,
    _link: OwnedFd,
    _prog: OwnedFd,
}

impl XdpSink {
    /// Attaches the program to `iface` (in this network namespace) in driver mode; fails on an
    /// interface whose driver has no XDP of its own or that already has a program.
    pub fn attach(iface: &str) -> Result<XdpSink, PortError> {
        let err = |op: &str| {
            let op = op.to_string();
            move |e: std::io::Error| PortError::os(iface, &op, e)
        };
        let probe = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0).map_err(err("socket"))?;
        let ifindex = sys::interface_index(&probe, iface).map_err(err("interface index"))?;
        let insns = [
            BpfInsn { code: 0xb7, regs: 0, off: 0, imm: XDP_DROP }, // r0 = XDP_DROP
            BpfInsn { code: 0x95, regs: 0, off: 0, imm: 0 },        // exit
        ];
        let license = CString::new("GPL").expect("no NUL");
        let prog = sys::bpf_prog_load(BPF_PROG_TYPE_XDP, &insns, &license, BPF_XDP, "rqvs_sink")
            .map_err(err("loading the XDP drop program"))?;
        let link = sys::bpf_link_create(&prog, ifindex, BPF_XDP, XDP_FLAGS_DRV_MODE)
            .map_err(err("attaching the XDP drop program in driver mode"))?;
        Ok(XdpSink { iface: iface.to_string(), _link: link, _prog: prog })
    }

    /// The interface's `rx_packets` as the calling thread's network namespace sees it
    /// (`/proc/thread-self/net/dev`, right also in a thread that entered the namespace with
    /// `setns`, where `/sys/class/net` still shows the namespace it was mounted in); `None` if
    /// unreadable.
    pub fn rx_packets(&self) -> Option<u64> {
        let text = std::fs::read_to_string("/proc/thread-self/net/dev").ok()?;
        text.lines().find_map(|line| {
            let (name, fields) = line.split_once(':')?;
            // rx: bytes packets errs drop ...
            (name.trim() == self.iface).then(|| fields.split_whitespace().nth(1)?.parse().ok())?
        })
    }
}
