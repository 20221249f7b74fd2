//! Thin, safe wrappers around the system calls the ports make: sockets and their options, `mmap`,
//! `sendmmsg`, the kicks that wake a socket's kernel side, interface ioctls, `setns` and `bpf(2)`.
//!
//! With [`crate::ring`] this is one of the two modules allowed `unsafe`; every other module calls
//! these functions and stays safe. Each function checks what the kernel returns and turns a failure
//! into an [`io::Error`] carrying `errno` — none panics. Structures handed to the kernel are
//! `#[repr(C)]` plain data ([`Pod`]), so reading them back from the kernel cannot produce an
//! invalid value.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use libc::{c_int, c_void};

use crate::BATCH;

/// Plain data: every bit pattern is a valid value and there is no padding the kernel could
/// misread. Only such types are passed to or filled in by `setsockopt`/`getsockopt`/`bpf`.
///
/// # Safety
/// Implement only for `#[repr(C)]` types made of integers (and arrays of them).
pub(crate) unsafe trait Pod: Copy {}

// SAFETY: integers are valid for every bit pattern.
unsafe impl Pod for c_int {}
// SAFETY: integers are valid for every bit pattern.
unsafe impl Pod for u32 {}
// SAFETY: repr(C) struct of seven c_uint.
unsafe impl Pod for libc::tpacket_req3 {}
// SAFETY: repr(C) struct of four c_uint.
unsafe impl Pod for libc::tpacket_req {}
// SAFETY: repr(C) struct of integers and a byte array.
unsafe impl Pod for libc::packet_mreq {}
// SAFETY: repr(C) struct of three c_uint.
unsafe impl Pod for libc::tpacket_stats_v3 {}
// SAFETY: repr(C) struct of u64/u32 fields, 32 bytes, no padding.
unsafe impl Pod for libc::xdp_umem_reg {}
// SAFETY: repr(C) struct of u64 fields.
unsafe impl Pod for libc::xdp_mmap_offsets {}
// SAFETY: repr(C) struct of u64 fields.
unsafe impl Pod for libc::xdp_statistics {}
// SAFETY: repr(C) struct of u16/u32 fields, 16 bytes, no padding.
unsafe impl Pod for libc::sockaddr_xdp {}
// SAFETY: repr(C) struct of u32 fields.
unsafe impl Pod for libc::xdp_options {}

fn cvt(r: c_int) -> io::Result<c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `socket(2)`, always close-on-exec.
pub(crate) fn socket(domain: c_int, ty: c_int, protocol: c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket takes no pointers; a non-negative return is a fresh descriptor we own.
    let fd = cvt(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(2)` with a plain-data value.
pub(crate) fn setsockopt<T: Pod>(fd: &OwnedFd, level: c_int, name: c_int, value: &T) -> io::Result<()> {
    // SAFETY: the pointer and length describe `value`, a live plain-data object.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast::<c_void>(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `getsockopt(2)` into a plain-data value (zeroed first, so a shorter answer leaves zeros).
pub(crate) fn getsockopt<T: Pod>(fd: &OwnedFd, level: c_int, name: c_int) -> io::Result<T> {
    let mut value = MaybeUninit::<T>::zeroed();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`, which has that many.
    cvt(unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, value.as_mut_ptr().cast(), &mut len) })?;
    // SAFETY: `value` was zeroed and T is plain data, so every byte pattern is a valid T.
    Ok(unsafe { value.assume_init() })
}

/// `bind(2)` of a packet socket to an interface (`protocol` in host order, 0 = receive nothing).
pub(crate) fn bind_packet(fd: &OwnedFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as c_int;
    // SAFETY: the pointer and length describe `sll`.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `bind(2)` of an XDP socket.
pub(crate) fn bind_xdp(fd: &OwnedFd, addr: &libc::sockaddr_xdp) -> io::Result<()> {
    // SAFETY: the pointer and length describe `addr`.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (addr as *const libc::sockaddr_xdp).cast(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// A memory mapping, unmapped on drop.
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; who may touch which bytes when is the business of the
// ring code that owns it, which documents its own rules.
unsafe impl Send for Mmap {}
// SAFETY: as above; `Mmap` itself only hands out its base pointer and length.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` at `offset`, shared, read-write, pre-faulted.
    pub(crate) fn shared(fd: &OwnedFd, len: usize, offset: u64) -> io::Result<Mmap> {
        Self::map(len, libc::MAP_SHARED | libc::MAP_POPULATE, fd.as_raw_fd(), offset)
    }

    /// Maps `len` bytes of zeroed anonymous memory, pre-faulted.
    pub(crate) fn anonymous(len: usize) -> io::Result<Mmap> {
        Self::map(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE, -1, 0)
    }

    fn map(len: usize, flags: c_int, fd: RawFd, offset: u64) -> io::Result<Mmap> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let offset = libc::off_t::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a fresh mapping chosen by the kernel (no fixed address), so no existing memory
        // is affected.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, offset) };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        NonNull::new(ptr.cast::<u8>())
            .map(|ptr| Mmap { ptr, len })
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, and nothing borrows the mapping any
        // more (its owners hold it until every view into it is gone).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// Sends each slice as one datagram with one `sendmmsg(2)` call; returns how many were sent.
/// At most [`BATCH`] slices are taken.
pub(crate) fn sendmmsg(fd: &OwnedFd, frames: &[&[u8]]) -> io::Result<usize> {
    let n = frames.len().min(BATCH);
    // SAFETY: iovec and mmsghdr are plain data; all-zero is valid (null pointers, zero lengths).
    let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..n {
        iov[i].iov_base = frames[i].as_ptr() as *mut c_void;
        iov[i].iov_len = frames[i].len();
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: `msgs[..n]` point at `iov[..n]`, which point at the caller's live slices; the
    // kernel only reads them.
    let r = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), n as libc::c_uint, libc::MSG_DONTWAIT) };
    cvt(r).map(|r| r as usize)
}

/// `send(2)` of one datagram, without blocking.
pub(crate) fn send(fd: &OwnedFd, frame: &[u8]) -> io::Result<usize> {
    // SAFETY: pointer and length describe the caller's slice, only read by the kernel.
    cvt_size(unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), libc::MSG_DONTWAIT) })
}

/// An empty `sendto(2)`: tells an XDP socket to process its TX ring.
pub(crate) fn kick_tx(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zero-length send with null buffer and address; the kernel reads nothing.
    cvt_size(unsafe { libc::sendto(fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) })
        .map(drop)
}

/// An empty `recvfrom(2)`: tells an XDP socket its fill ring has new buffers.
pub(crate) fn kick_rx(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zero-length receive into a null buffer; the kernel writes nothing.
    cvt_size(unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    })
    .map(drop)
}

/// What a [`recv_frame`] call got: the frame's length on the wire and the VLAN tag the kernel
/// took out of it (AF_PACKET hands VLAN-tagged frames over with the tag moved to metadata).
pub(crate) struct Received {
    pub(crate) len: usize,
    pub(crate) vlan: Option<(u16, u16)>,
    pub(crate) outgoing: bool,
    /// `TP_STATUS_CSUMNOTREADY`: the checksum is left to whoever sends the frame on.
    pub(crate) csum_not_ready: bool,
}

/// `recvmsg(2)` of one frame on a packet socket with `PACKET_AUXDATA` on; waits up to
/// `timeout_ms` (poll) for one to arrive. `Ok(None)` on timeout.
pub(crate) fn recv_frame(fd: &OwnedFd, buf: &mut [u8], timeout_ms: i32) -> io::Result<Option<Received>> {
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    if cvt(unsafe { libc::poll(&mut pfd, 1, timeout_ms) })? == 0 {
        return Ok(None);
    }
    recv_nowait(fd, buf)
}

/// `recvmsg(2)` of one frame on a packet socket with `PACKET_AUXDATA` on, without waiting:
/// `Ok(None)` when none is queued.
pub(crate) fn recv_nowait(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<Received>> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control = [0u64; 16];
    // SAFETY: sockaddr_ll is plain data; all-zero is valid.
    let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    // SAFETY: msghdr is plain data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 16]>();
    // SAFETY: every pointer in `msg` refers to a live local or to the caller's buffer, with the
    // lengths given.
    let r = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_TRUNC) };
    let len = match cvt_size(r) {
        Ok(len) => len,
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut vlan = None;
    let mut csum_not_ready = false;
    // SAFETY: `msg` was filled by recvmsg; the CMSG macros walk the control buffer within
    // msg_controllen, and the auxdata payload is read unaligned into a plain-data struct.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_PACKET && (*cmsg).cmsg_type == libc::PACKET_AUXDATA {
                let aux = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::tpacket_auxdata>());
                csum_not_ready = aux.tp_status & libc::TP_STATUS_CSUMNOTREADY != 0;
                if aux.tp_status & libc::TP_STATUS_VLAN_VALID != 0 || aux.tp_vlan_tci != 0 {
                    let tpid =
                        if aux.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 { aux.tp_vlan_tpid } else { 0x8100 };
                    vlan = Some((tpid, aux.tp_vlan_tci));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(Some(Received { len, vlan, outgoing: from.sll_pkttype == libc::PACKET_OUTGOING, csum_not_ready }))
}

/// The `struct ifreq` of the interface ioctls: a name and a 24-byte union.
#[repr(C, align(8))]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; 24],
}

fn ifreq_ioctl(fd: &OwnedFd, request: libc::c_ulong, req: &mut IfReq) -> io::Result<()> {
    // SAFETY: `req` is a 40-byte ifreq the kernel reads and writes within its size (TUNSETIFF
    // and TUNSETQUEUE too: they read the name and flags, and write the name); for
    // SIOCETHTOOL its data holds the address of the caller's live `EthtoolChannels` or
    // `EthtoolCmd` (the size the command implies), whose
    // address was exposed by the integer cast and which the kernel writes within its size.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), request as _, req as *mut IfReq) }).map(drop)
}

/// The name of interface `ifindex` in the socket's network namespace (`ENODEV` when gone).
pub(crate) fn interface_name(fd: &OwnedFd, ifindex: u32) -> io::Result<String> {
    let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: [0; 24] };
    req.data[..4].copy_from_slice(&(ifindex as i32).to_ne_bytes());
    ifreq_ioctl(fd, libc::SIOCGIFNAME, &mut req)?;
    let end = req.name.iter().position(|&b| b == 0).unwrap_or(req.name.len());
    Ok(String::from_utf8_lossy(&req.name[..end]).into_owned())
}

fn named_ifreq(name: &str) -> io::Result<IfReq> {
    let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: [0; 24] };
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.as_bytes().contains(&0) {
        return Err(io::Error::from_raw_os_error(libc::ENODEV));
    }
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    Ok(req)
}

/// Opens one queue of the tap device `name` (made when it does not exist; a multi-queue tap
/// without packet information, as OVS's netdev datapath makes its internal ports), non-blocking.
/// `EBUSY` when `name` is another kind of device (or a tap made without multi-queue).
pub(crate) fn tap_open(name: &str) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    let fd = OwnedFd::from(file);
    let mut req = named_ifreq(name)?;
    let flags = (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_MULTI_QUEUE) as u16;
    req.data[..2].copy_from_slice(&flags.to_ne_bytes());
    ifreq_ioctl(&fd, libc::TUNSETIFF as libc::c_ulong, &mut req)?;
    Ok(fd)
}

/// Detaches a tap queue (`TUNSETQUEUE`, `IFF_DETACH_QUEUE`): the kernel sends it nothing more,
/// and the device lives on while the descriptor is open.
pub(crate) fn tap_detach(fd: &OwnedFd) -> io::Result<()> {
    let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: [0; 24] };
    req.data[..2].copy_from_slice(&(libc::IFF_DETACH_QUEUE as u16).to_ne_bytes());
    ifreq_ioctl(fd, libc::TUNSETQUEUE as libc::c_ulong, &mut req)
}

/// `read(2)` of one frame from a non-blocking descriptor: `Ok(None)` when none is waiting.
pub(crate) fn read_nonblocking(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: pointer and length describe the caller's live, writable slice; the kernel writes
    // at most `buf.len()` bytes into it.
    match cvt_size(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }) {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// `write(2)` of one frame.
pub(crate) fn write(fd: &OwnedFd, frame: &[u8]) -> io::Result<usize> {
    // SAFETY: pointer and length describe the caller's slice, only read by the kernel.
    cvt_size(unsafe { libc::write(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) })
}

/// The interface flags (`IFF_UP`, `IFF_RUNNING`, ...) of `name`.
pub(crate) fn interface_flags(fd: &OwnedFd, name: &str) -> io::Result<u32> {
    let mut req = named_ifreq(name)?;
    ifreq_ioctl(fd, libc::SIOCGIFFLAGS, &mut req)?;
    Ok(u16::from_ne_bytes([req.data[0], req.data[1]]) as u32)
}

/// Sets `name` administratively up or down (`SIOCSIFFLAGS` with `IFF_UP` changed, the other
/// flags as they are), as `ip link set NAME up|down`.
pub(crate) fn set_interface_up(fd: &OwnedFd, name: &str, up: bool) -> io::Result<()> {
    let flags = interface_flags(fd, name)?;
    let flags = if up { flags | libc::IFF_UP as u32 } else { flags & !(libc::IFF_UP as u32) };
    let mut req = named_ifreq(name)?;
    req.data[..2].copy_from_slice(&(flags as u16).to_ne_bytes());
    ifreq_ioctl(fd, libc::SIOCSIFFLAGS, &mut req)
}

/// The ifindex of `name` in the socket's network namespace.
pub(crate) fn interface_index(fd: &OwnedFd, name: &str) -> io::Result<u32> {
    let mut req = named_ifreq(name)?;
    ifreq_ioctl(fd, libc::SIOCGIFINDEX, &mut req)?;
    Ok(i32::from_ne_bytes([req.data[0], req.data[1], req.data[2], req.data[3]]) as u32)
}

/// The MTU of `name`.
pub(crate) fn interface_mtu(fd: &OwnedFd, name: &str) -> io::Result<u32> {
    let mut req = named_ifreq(name)?;
    ifreq_ioctl(fd, libc::SIOCGIFMTU, &mut req)?;
    Ok(i32::from_ne_bytes([req.data[0], req.data[1], req.data[2], req.data[3]]).max(0) as u32)
}

/// `struct ethtool_channels` (ETHTOOL_GCHANNELS).
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// The receive queues of `name` (its rx plus combined channels, per ETHTOOL_GCHANNELS).
pub(crate) fn interface_rx_queues(fd: &OwnedFd, name: &str) -> io::Result<u32> {
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    let mut ch = EthtoolChannels { cmd: ETHTOOL_GCHANNELS, ..EthtoolChannels::default() };
    let mut req = named_ifreq(name)?;
    req.data[..8].copy_from_slice(&((&mut ch as *mut EthtoolChannels) as u64).to_ne_bytes());
    ifreq_ioctl(fd, libc::SIOCETHTOOL, &mut req)?;
    Ok(ch.rx_count + ch.combined_count)
}

/// The hardware (MAC) address of `name` (`SIOCGIFHWADDR`).
pub(crate) fn interface_hw_addr(fd: &OwnedFd, name: &str) -> io::Result<[u8; 6]> {
    let mut req = named_ifreq(name)?;
    ifreq_ioctl(fd, libc::SIOCGIFHWADDR, &mut req)?;
    // A `struct sockaddr`: the family (2 bytes), then the address.
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&req.data[2..8]);
    Ok(mac)
}

/// `struct ethtool_cmd` (ETHTOOL_GSET): what is read of it is the speed and duplex.
#[repr(C)]
#[derive(Default)]
struct EthtoolCmd {
    cmd: u32,
    supported: u32,
    advertising: u32,
    speed: u16,
    duplex: u8,
    port: u8,
    phy_address: u8,
    transceiver: u8,
    autoneg: u8,
    mdio_support: u8,
    maxtxpkt: u32,
    maxrxpkt: u32,
    speed_hi: u16,
    eth_tp_mdix: u8,
    eth_tp_mdix_ctrl: u8,
    lp_advertising: u32,
    reserved: [u32; 2],
}

/// The link speed of `name` in Mb/s and whether it is full duplex (ETHTOOL_GSET); `None` when
/// the driver reports no speed (unknown, or the link is down).
pub(crate) fn interface_speed(fd: &OwnedFd, name: &str) -> io::Result<Option<(u32, bool)>> {
    const ETHTOOL_GSET: u32 = 0x1;
    let mut cmd = EthtoolCmd { cmd: ETHTOOL_GSET, ..EthtoolCmd::default() };
    let mut req = named_ifreq(name)?;
    req.data[..8].copy_from_slice(&((&mut cmd as *mut EthtoolCmd) as u64).to_ne_bytes());
    ifreq_ioctl(fd, libc::SIOCETHTOOL, &mut req)?;
    let speed = u32::from(cmd.speed) | u32::from(cmd.speed_hi) << 16;
    Ok((speed != 0 && speed != u32::MAX).then_some((speed, cmd.duplex == 1)))
}

/// Moves the calling thread into the network namespace `fd` refers to.
pub(crate) fn setns_net(fd: &std::fs::File) -> io::Result<()> {
    // SAFETY: setns takes a descriptor and a flag; it affects only the calling thread.
    cvt(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Whether the process runs with effective uid 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

// ---- bpf(2) ----------------------------------------------------------------------------------

const BPF_MAP_CREATE: c_int = 0;
const BPF_MAP_UPDATE_ELEM: c_int = 2;
const BPF_PROG_LOAD: c_int = 5;
const BPF_PROG_TEST_RUN: c_int = 10;

/// The program type and attach type of an XDP program, the attach modes and the verdicts that
/// this crate's programs (the AF_XDP port's, the XDP sender's, the sink's) use.
pub(crate) const BPF_PROG_TYPE_XDP: u32 = 6;
pub(crate) const BPF_XDP: u32 = 37;
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
pub(crate) const XDP_DROP: i32 = 1;
pub(crate) const XDP_PASS: i32 = 2;
pub(crate) const XDP_TX: i32 = 3;
const BPF_LINK_CREATE: c_int = 28;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BpfInsn {
    pub(crate) code: u8,
    /// dst_reg in the low nibble, src_reg in the high nibble.
    pub(crate) regs: u8,
    pub(crate) off: i16,
    pub(crate) imm: i32,
}

/// `union bpf_attr` as one zeroed, 8-aligned block; the commands below fill the fields they use.
#[repr(C, align(8))]
struct BpfAttr([u8; 128]);

impl BpfAttr {
    fn new() -> BpfAttr {
        BpfAttr([0; 128])
    }
    fn u32(&mut self, offset: usize, v: u32) -> &mut Self {
        self.0[offset..offset + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, offset: usize, v: u64) -> &mut Self {
        self.0[offset..offset + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn bytes(&mut self, offset: usize, v: &[u8]) -> &mut Self {
        self.0[offset..offset + v.len()].copy_from_slice(v);
        self
    }
}

fn bpf(cmd: c_int, attr: &mut BpfAttr) -> io::Result<c_int> {
    // SAFETY: `attr` is a 128-byte, zero-extended bpf_attr; any pointers in it were set by the
    // callers below to buffers that outlive this call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut BpfAttr, size_of::<BpfAttr>() as u32) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as c_int)
    }
}

fn owned(fd: c_int) -> OwnedFd {
    // SAFETY: `fd` was just returned by bpf(2) as a new descriptor owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = name.len().min(15);
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
    out
}

/// `BPF_MAP_CREATE` (map_type, key_size, value_size, max_entries, map_flags, ..., map_name@40).
pub(crate) fn bpf_map_create(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut attr = BpfAttr::new();
    attr.u32(0, map_type).u32(4, key_size).u32(8, value_size).u32(12, max_entries).bytes(28, &name16(name));
    bpf(BPF_MAP_CREATE, &mut attr).map(owned)
}

/// `BPF_MAP_UPDATE_ELEM` with a u32 key and a u32 value.
pub(crate) fn bpf_map_update_u32(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    let mut attr = BpfAttr::new();
    attr.u32(0, map.as_raw_fd() as u32)
        .u64(8, (&key as *const u32) as u64)
        .u64(16, (&value as *const u32) as u64)
        .u64(24, 0);
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// `BPF_MAP_UPDATE_ELEM` with a key and a value of the map's sizes (checked by the kernel).
pub(crate) fn bpf_map_update(map: &OwnedFd, key: &[u8], value: &[u8]) -> io::Result<()> {
    let mut attr = BpfAttr::new();
    attr.u32(0, map.as_raw_fd() as u32).u64(8, key.as_ptr() as u64).u64(16, value.as_ptr() as u64).u64(24, 0);
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// `BPF_PROG_TEST_RUN` of an XDP program with `BPF_F_TEST_XDP_LIVE_FRAMES`: `repeat` frames made
/// from `data`, each run through `prog` on `ifindex`'s receive queue 0, and what the program
/// returns done for real (`XDP_TX`: sent out of `ifindex`), `batch` frames at a time.
pub(crate) fn bpf_xdp_live_frames(
    prog: &OwnedFd,
    data: &[u8],
    meta: usize,
    ifindex: u32,
    repeat: u32,
    batch: u32,
) -> io::Result<()> {
    const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex;
    // the first `meta` bytes of `data` are the frames' metadata (data = its length).
    let ctx: [u32; 6] = [meta as u32, data.len() as u32, 0, ifindex, 0, 0];
    let mut attr = BpfAttr::new();
    attr.u32(0, prog.as_raw_fd() as u32)
        .u32(8, data.len() as u32)
        .u64(16, data.as_ptr() as u64)
        .u32(32, repeat)
        .u32(40, size_of_val(&ctx) as u32)
        .u64(48, ctx.as_ptr() as u64)
        .u32(64, BPF_F_TEST_XDP_LIVE_FRAMES)
        .u32(72, batch);
    bpf(BPF_PROG_TEST_RUN, &mut attr).map(drop)
}

/// `BPF_PROG_LOAD`; on failure the load is tried again with the verifier's log on, and the log is
/// appended to the error message. (Loading with the log on from the start fails with `ENOSPC`
/// whenever a successful verification's log outgrows the buffer.)
pub(crate) fn bpf_prog_load(
    prog_type: u32,
    insns: &[BpfInsn],
    license: &CStr,
    expected_attach_type: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let load = |log: &mut [u8]| {
        let mut attr = BpfAttr::new();
        attr.u32(0, prog_type)
            .u32(4, insns.len() as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .bytes(48, &name16(name))
            .u32(68, expected_attach_type);
        if !log.is_empty() {
            attr.u32(24, 1).u32(28, log.len() as u32).u64(32, log.as_mut_ptr() as u64);
        }
        bpf(BPF_PROG_LOAD, &mut attr).map(owned)
    };
    let e = match load(&mut []) {
        Ok(fd) => return Ok(fd),
        Err(e) => e,
    };
    let mut log = vec![0u8; 1 << 16];
    let _ = load(&mut log);
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(&log[..end]).replace('\n', "; ");
    if text.trim().is_empty() {
        Err(e)
    } else {
        Err(io::Error::new(e.kind(), format!("{e} (verifier: {})", text.trim())))
    }
}

/// `BPF_LINK_CREATE` (prog_fd, target_ifindex, attach_type, flags): the program stays attached
/// while the returned descriptor is open.
pub(crate) fn bpf_link_create(prog: &OwnedFd, ifindex: u32, attach_type: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = BpfAttr::new();
    attr.u32(0, prog.as_raw_fd() as u32).u32(4, ifindex).u32(8, attach_type).u32(12, flags);
    bpf(BPF_LINK_CREATE, &mut attr).map(owned)
}
