//! `pcap-in:FILE` and `pcap-out:FILE`: offline ports, so a switch runs anywhere.
//!
//! **`pcap-in`** ([`crate::open_frames`] for frames already in memory) reads a whole capture at
//! open when it is a regular file of at most [`crate::pcap_stream::IN_MEMORY_LIMIT`] (anything
//! else is streamed through a bounded window: [`crate::pcap_stream`]) — classic pcap (either byte order, micro- or
//! nanosecond) or pcapng (enhanced and simple packet blocks of Ethernet interfaces; packets of
//! other link types are skipped) — and delivers its frames, as captured, in file order, as fast
//! as they are polled ([`PcapConfig::loops`] times). With several queues, each frame goes to the
//! queue its [`flow_hash`] picks, so a flow's frames stay in order on one queue, as the fanout of
//! an `afpacket` port does. Each frame is copied into the queue's own buffer with
//! [`MIN_HEADROOM`](crate::MIN_HEADROOM) plus 56 bytes of headroom and 64 of tailroom, so in-place
//! rewrites never touch the loaded file. When every queue has delivered its last frame the port
//! reports [`EventKind::EndOfInput`](crate::EventKind::EndOfInput) once.
//!
//! **`pcap-out`** writes every frame sent to it to a classic pcap (little-endian, microsecond
//! timestamps of the wall clock at flush, snap length 262144; frames longer are cut, the record
//! keeps their length). Its transmit queues stage frames
//! and take the file's lock once per flush, not per frame; the file is flushed when the last
//! queue is dropped.
//!
//! The other side of each is inert: a `pcap-in` port's transmit queues count every frame as
//! `tx_dropped` (there is nowhere to send it), a `pcap-out` port's receive queues are always
//! empty.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, PcapError};

use crate::error::PortError;
use crate::port::Staging;
use crate::ring::Slot;
use crate::stats::{bump, PortShared, QueueCounters};
use crate::BATCH;

const HEADROOM: usize = 64;
const TAILROOM: usize = 64;

/// Options of `pcap-in` ports.
#[derive(Clone, Debug)]
pub struct PcapConfig {
    /// How many times the file's frames are delivered (at least once).
    pub loops: u64,
}

impl Default for PcapConfig {
    fn default() -> Self {
        PcapConfig { loops: 1 }
    }
}

/// The frames of a capture, back to back.
pub(crate) struct Frames {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Frames {
    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }
}

/// The Ethernet frames of a pcap or pcapng capture, in file order, as captured (a frame cut by a
/// snap length is delivered cut). `name` is used in errors.
pub fn parse_frames(name: &str, bytes: &[u8]) -> Result<Vec<Vec<u8>>, PortError> {
    let frames = parse(name, bytes)?;
    Ok((0..frames.len()).map(|i| frames.get(i).to_vec()).collect())
}

fn parse(name: &str, bytes: &[u8]) -> Result<Frames, PortError> {
    let fail = |message: String| PortError::Pcap { path: name.to_string(), message };
    let mut out = Frames { bytes: Vec::with_capacity(bytes.len()), ends: Vec::new() };
    let mut push = |data: &[u8]| {
        out.bytes.extend_from_slice(data);
        out.ends.push(out.bytes.len());
    };
    let magic = bytes.get(..4).unwrap_or(&[]);
    if magic == [0x0a, 0x0d, 0x0d, 0x0a] {
        let (mut rest, mut parser) =
            PcapNgParser::new(bytes).map_err(|e| fail(format!("pcapng section header: {e}")))?;
        let mut linktypes: Vec<DataLink> = Vec::new();
        while !rest.is_empty() {
            let offset = bytes.len() - rest.len();
            let (next, block) =
                parser.next_block(rest).map_err(|e| fail(format!("block at byte {offset}: {}", describe(&e))))?;
            rest = next;
            let ethernet = |id: u32| linktypes.get(id as usize) == Some(&DataLink::ETHERNET);
            match block {
                Block::SectionHeader(_) => linktypes.clear(),
                Block::InterfaceDescription(idb) => linktypes.push(idb.linktype),
                Block::EnhancedPacket(epb) if ethernet(epb.interface_id) => push(&epb.data),
                Block::SimplePacket(spb) if ethernet(0) => push(&spb.data),
                _ => {}
            }
        }
    } else {
        let (mut rest, parser) = PcapParser::new(bytes).map_err(|e| {
            fail(format!("not a pcap or pcapng capture ({}): the file starts with {magic:02x?}", describe(&e)))
        })?;
        if parser.header().datalink != DataLink::ETHERNET {
            return Err(fail(format!("link type {:?} is not Ethernet", parser.header().datalink)));
        }
        let mut index = 0usize;
        while !rest.is_empty() {
            let offset = bytes.len() - rest.len();
            index += 1;
            let (next, packet) = parser
                .next_raw_packet(rest)
                .map_err(|e| fail(format!("packet {index} (byte {offset}): {}", describe(&e))))?;
            push(&packet.data);
            rest = next;
        }
    }
    Ok(out)
}

fn describe(e: &PcapError) -> String {
    match e {
        PcapError::IncompleteBuffer => "the file ends inside a record".to_string(),
        e => e.to_string(),
    }
}

/// A symmetric flow hash of a raw frame: IPv4 addresses, protocol and TCP/UDP/SCTP ports (either
/// direction hashes the same), behind up to two VLAN tags; other frames hash their MAC addresses
/// and ethertype. Never panics on short frames.
pub fn flow_hash(frame: &[u8]) -> u32 {
    let be16 = |at: usize| frame.get(at..at + 2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    let mix = |h: u32, v: u32| (h ^ v).wrapping_mul(0x9e37_79b1).rotate_left(13);
    let mut l3 = 12;
    let mut ethertype = be16(l3);
    for _ in 0..2 {
        if ethertype == 0x8100 || ethertype == 0x88a8 {
            l3 += 4;
            ethertype = be16(l3);
        }
    }
    l3 += 2;
    if ethertype == 0x0800 {
        if let Some(ip) = frame.get(l3..l3 + 20) {
            let (src, dst) = (
                u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]),
                u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]),
            );
            let proto = ip[9] as u32;
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let first_fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff == 0;
            let (mut sp, mut dp) = (0, 0);
            if first_fragment && matches!(proto, 6 | 17 | 132) {
                sp = be16(l3 + ihl) as u32;
                dp = be16(l3 + ihl + 2) as u32;
            }
            return mix(mix(mix(0, src.min(dst) ^ src.max(dst).rotate_left(16)), proto), sp.min(dp) | sp.max(dp) << 16);
        }
    }
    let mac = |at: usize| frame.get(at..at + 6).map_or(0, |m| m.iter().fold(0u32, |h, &b| h.rotate_left(5) ^ b as u32));
    let (a, b) = (mac(0), mac(6));
    mix(mix(0, a.min(b) ^ a.max(b).rotate_left(16)), ethertype as u32)
}

/// Opens a capture for a `pcap-in` port over `queues` queues: a regular file up to
/// [`crate::pcap_stream::IN_MEMORY_LIMIT`] is loaded whole and split; anything else is streamed
/// ([`crate::pcap_stream`]).
pub(crate) fn open_in(path: &Path, queues: usize, cfg: &PcapConfig) -> Result<Vec<Rx>, PortError> {
    if !crate::pcap_stream::in_memory(path) {
        let streams = crate::pcap_stream::open(path, queues, cfg.loops)?;
        return Ok(streams.into_iter().map(|s| Rx { stream: Some(s), ..Rx::empty() }).collect());
    }
    let name = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| PortError::Pcap { path: name.clone(), message: format!("cannot read: {e}") })?;
    Ok(split(parse(&name, &bytes)?, queues, cfg))
}

/// The queues of a `pcap-in` port over frames already in memory.
pub(crate) fn open_memory(frames: &[Vec<u8>], queues: usize, cfg: &PcapConfig) -> Vec<Rx> {
    let mut all =
        Frames { bytes: Vec::with_capacity(frames.iter().map(Vec::len).sum()), ends: Vec::with_capacity(frames.len()) };
    for f in frames {
        all.bytes.extend_from_slice(f);
        all.ends.push(all.bytes.len());
    }
    split(all, queues, cfg)
}

fn split(frames: Frames, queues: usize, cfg: &PcapConfig) -> Vec<Rx> {
    let frames = Arc::new(frames);
    let mut mine: Vec<Vec<u32>> = vec![Vec::new(); queues];
    for i in 0..frames.len() {
        let q = if queues == 1 { 0 } else { flow_hash(frames.get(i)) as usize % queues };
        mine[q].push(i as u32);
    }
    mine.into_iter()
        .map(|mine| Rx {
            frames: frames.clone(),
            mine,
            pos: 0,
            loops_left: cfg.loops.max(1),
            bufs: (0..BATCH).map(|_| Vec::new()).collect(),
            finished: false,
            stream: None,
        })
        .collect()
}

/// One queue of a `pcap-in` port.
pub(crate) struct Rx {
    frames: Arc<Frames>,
    mine: Vec<u32>,
    pos: usize,
    loops_left: u64,
    bufs: Vec<Vec<u8>>,
    finished: bool,
    /// A streamed input: its frames come from here, not `frames`.
    stream: Option<crate::pcap_stream::StreamRx>,
}

impl Rx {
    fn empty() -> Rx {
        Rx {
            frames: Arc::new(Frames { bytes: Vec::new(), ends: Vec::new() }),
            mine: Vec::new(),
            pos: 0,
            loops_left: 1,
            bufs: (0..BATCH).map(|_| Vec::new()).collect(),
            finished: false,
            stream: None,
        }
    }

    /// A streamed queue's fill: what has arrived, never waiting.
    fn fill_stream(&mut self, slots: &mut [Slot], shared: &PortShared) -> usize {
        use crate::pcap_stream::Next;
        let Some(stream) = self.stream.as_mut() else { return 0 };
        let mut n = 0;
        while n < slots.len() && !self.finished {
            let frame = match stream.next() {
                Next::Frame(f) => f,
                Next::Empty => break,
                Next::Failed(e) => {
                    shared.error("reading the capture", &std::io::Error::other(e));
                    continue;
                }
                Next::End => {
                    self.finished = true;
                    shared.input_finished();
                    break;
                }
            };
            let buf = &mut self.bufs[n];
            let need = HEADROOM + frame.len() + TAILROOM;
            if buf.len() < need {
                buf.resize(need, 0);
            }
            buf[HEADROOM..HEADROOM + frame.len()].copy_from_slice(frame);
            slots[n] = Slot::over(buf, HEADROOM, frame.len());
            n += 1;
        }
        n
    }

    pub(crate) fn fill(&mut self, slots: &mut [Slot], shared: &PortShared) -> usize {
        if self.stream.is_some() {
            return self.fill_stream(slots, shared);
        }
        let mut n = 0;
        while n < slots.len() && !self.finished {
            if self.pos == self.mine.len() {
                self.loops_left -= 1;
                self.pos = 0;
                if self.loops_left == 0 || self.mine.is_empty() {
                    self.finished = true;
                    shared.input_finished();
                    break;
                }
            }
            let frame = self.frames.get(self.mine[self.pos] as usize);
            self.pos += 1;
            let buf = &mut self.bufs[n];
            let need = HEADROOM + frame.len() + TAILROOM;
            if buf.len() < need {
                buf.resize(need, 0);
            }
            buf[HEADROOM..HEADROOM + frame.len()].copy_from_slice(frame);
            slots[n] = Slot::over(buf, HEADROOM, frame.len());
            n += 1;
        }
        n
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }
}

/// The file of a `pcap-out` port, shared by its transmit queues. The format is simple enough to
/// write directly: a 24-byte file header, then a 16-byte header per record.
pub(crate) struct Sink {
    file: BufWriter<File>,
    path: String,
}

const SNAPLEN: u32 = 262_144;

impl Sink {
    fn write(&mut self, ts: Duration, frame: &[u8]) -> std::io::Result<()> {
        let len = frame.len().min(SNAPLEN as usize) as u32;
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&(ts.as_secs() as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&ts.subsec_micros().to_le_bytes());
        rec[8..12].copy_from_slice(&len.to_le_bytes());
        rec[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        self.file.write_all(&rec)?;
        self.file.write_all(&frame[..len as usize])
    }
}

/// Creates the file of a `pcap-out` port (truncating it): little-endian, microseconds, Ethernet.
pub(crate) fn open_out(path: &Path) -> Result<Arc<Mutex<Sink>>, PortError> {
    let name = path.display().to_string();
    let fail = |message: String| PortError::Pcap { path: name.clone(), message };
    let mut file = BufWriter::new(File::create(path).map_err(|e| fail(format!("cannot create: {e}")))?);
    let mut header = Vec::with_capacity(24);
    header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes());
    header.extend_from_slice(&[0; 8]); // thiszone, sigfigs
    header.extend_from_slice(&SNAPLEN.to_le_bytes());
    header.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    file.write_all(&header).and_then(|()| file.flush()).map_err(|e| fail(format!("cannot write: {e}")))?;
    Ok(Arc::new(Mutex::new(Sink { file, path: name })))
}

/// One transmit queue of a `pcap-out` port.
pub(crate) struct Tx {
    sink: Arc<Mutex<Sink>>,
    pub(crate) staging: Staging,
}

impl Tx {
    pub(crate) fn new(sink: Arc<Mutex<Sink>>) -> Tx {
        Tx { sink, staging: Staging::new() }
    }

    pub(crate) fn flush(&mut self, c: &QueueCounters, shared: &PortShared) {
        let staged = self.staging.take();
        let n = staged.len();
        if n == 0 {
            return;
        }
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or(Duration::ZERO);
        let Ok(mut sink) = self.sink.lock() else {
            bump(&c.tx_dropped, n as u64);
            return;
        };
        for frame in staged {
            match sink.write(now, frame) {
                Ok(_) => {
                    bump(&c.tx_packets, 1);
                    bump(&c.tx_bytes, frame.len() as u64);
                }
                Err(e) => {
                    bump(&c.tx_dropped, 1);
                    bump(&c.tx_errors, 1);
                    shared.error("writing the capture", &e);
                }
            }
        }
    }

    /// Flushes the staged frames and the file's buffer (the switch calls it at shutdown; dropping
    /// the queue does it too).
    pub(crate) fn sync(&mut self, c: &QueueCounters, shared: &PortShared) {
        self.flush(c, shared);
        let flushed = self.sink.lock().map(|mut s| s.file.flush().map_err(|e| (s.path.clone(), e)));
        if let Ok(Err((path, e))) = flushed {
            bump(&c.tx_errors, 1);
            shared.error("flushing the capture", &std::io::Error::other(format!("{path}: {e}")));
        }
    }
}
