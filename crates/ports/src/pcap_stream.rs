//! `pcap-in` from an input that is not read whole: a file above [`IN_MEMORY_LIMIT`], or one that
//! is not a regular file (a FIFO, a character device, `/dev/stdin`). A reader thread of the port
//! parses the capture as it reads it — a window of at most [`MAX_RECORD`] + [`CHUNK`] bytes —
//! and hands the frames to the port's queues in batches through bounded channels (at most
//! [`QUEUED`] batches of at most [`BATCH_FRAMES`] frames / [`BATCH_BYTES`] bytes each per
//! queue): memory stays bounded whatever the input's length. The PMDs never wait for it: a queue
//! whose batch has not come yet delivers nothing on that poll.
//!
//! The header is read and checked when the port opens (so `pcap-in:/dev/zero` is an error at
//! start: not a capture). A damaged record further on (or a read error) ends the port's input:
//! reported once as a port error (`reading the capture: FILE: packet N (byte B): ...`), then the
//! end of input, as at the end of the file. [`crate::PcapConfig::loops`] above 1 re-reads a file
//! from its start; an input that cannot seek (a FIFO) is read once (reported once).
//!
//! The reader thread ends when the input does, or when the port is closed (its queues gone);
//! a thread blocked reading a FIFO that never writes again is left to end with the process.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, PcapError};

use crate::error::PortError;
use crate::pcap::flow_hash;

/// Regular files up to this size are read whole at open (`pcap.rs`: every error found at open,
/// loops replayed from memory); larger ones, and inputs that are not regular files, are streamed.
pub const IN_MEMORY_LIMIT: u64 = 256 << 20;
/// The longest record or block the reader accepts (pcap's records are at most the snap length,
/// 256 KiB in practice); a longer one is a damaged capture.
pub const MAX_RECORD: usize = 16 << 20;
/// Bytes read from the input at a time.
pub const CHUNK: usize = 1 << 20;
/// Frames in one batch at most, and bytes.
pub const BATCH_FRAMES: usize = 64;
pub const BATCH_BYTES: usize = 256 << 10;
/// Batches waiting for one queue at most.
pub const QUEUED: usize = 16;

/// Frames for one queue, back to back; or the reason the input ended early.
pub(crate) struct Batch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    error: Option<String>,
}

impl Batch {
    fn new() -> Batch {
        Batch { bytes: Vec::new(), ends: Vec::new(), error: None }
    }

    fn full(&self) -> bool {
        self.ends.len() >= BATCH_FRAMES || self.bytes.len() >= BATCH_BYTES
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

enum Format {
    Pcap(PcapParser),
    PcapNg { parser: PcapNgParser, linktypes: Vec<DataLink> },
}

/// A capture parsed as it is read, through a bounded window.
struct Parser {
    name: String,
    src: File,
    buf: Vec<u8>,
    /// Where the unparsed bytes start in `buf`, and the input's offset of `buf[0]`.
    start: usize,
    base: u64,
    eof: bool,
    /// `None` until the header is read.
    format: Option<Format>,
    packets: u64,
}

fn describe(e: &PcapError) -> String {
    match e {
        PcapError::IncompleteBuffer => "the file ends inside a record".to_string(),
        e => e.to_string(),
    }
}

impl Parser {
    /// Opens `path` and parses its header (pcap) or first section header (pcapng).
    fn open(path: &Path) -> Result<Parser, String> {
        let src = File::open(path).map_err(|e| format!("cannot read: {e}"))?;
        let name = path.display().to_string();
        let mut p = Parser { name, src, buf: Vec::new(), start: 0, base: 0, eof: false, format: None, packets: 0 };
        p.header()?;
        Ok(p)
    }

    /// Reads more of the input after the unparsed bytes; an error when one record would need
    /// more than [`MAX_RECORD`] bytes.
    fn refill(&mut self) -> Result<(), String> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.base += self.start as u64;
            self.start = 0;
        }
        if self.buf.len() >= MAX_RECORD {
            return Err(format!(
                "packet {} (byte {}): a record longer than {} MiB (a damaged capture)",
                self.packets + 1,
                self.base,
                MAX_RECORD >> 20
            ));
        }
        let len = self.buf.len();
        self.buf.resize(len + CHUNK, 0);
        let n = loop {
            match self.src.read(&mut self.buf[len..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(len);
                    return Err(format!("cannot read: {e}"));
                }
            }
        };
        self.buf.truncate(len + n);
        self.eof = n == 0;
        Ok(())
    }

    fn header(&mut self) -> Result<(), String> {
        loop {
            let avail = &self.buf[self.start..];
            let pcapng = avail.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]);
            let parsed = if avail.len() < 4 {
                Err(PcapError::IncompleteBuffer)
            } else if pcapng {
                PcapNgParser::new(avail)
                    .map(|(rest, parser)| (avail.len() - rest.len(), Format::PcapNg { parser, linktypes: Vec::new() }))
            } else {
                PcapParser::new(avail).map(|(rest, parser)| (avail.len() - rest.len(), Format::Pcap(parser)))
            };
            match parsed {
                Ok((used, format)) => {
                    if let Format::Pcap(p) = &format {
                        if p.header().datalink != DataLink::ETHERNET {
                            return Err(format!("link type {:?} is not Ethernet", p.header().datalink));
                        }
                    }
                    self.start += used;
                    self.format = Some(format);
                    return Ok(());
                }
                Err(PcapError::IncompleteBuffer) if !self.eof && self.buf.len() < MAX_RECORD => self.refill()?,
                Err(e) if pcapng => return Err(format!("pcapng section header: {}", describe(&e))),
                Err(e) => {
                    let head = &self.buf[..self.buf.len().min(4)];
                    return Err(format!(
                        "not a pcap or pcapng capture ({}): the file starts with {head:02x?}",
                        describe(&e)
                    ));
                }
            }
        }
    }

    /// The next Ethernet frame, handed to `deliver`; false at the end of the input.
    fn next(&mut self, mut deliver: impl FnMut(&[u8])) -> Result<bool, String> {
        loop {
            let Parser { buf, start, format, .. } = self;
            let Some(format) = format else { return Ok(false) };
            let avail = &buf[*start..];
            let parsed: Result<(usize, bool), PcapError> = match format {
                Format::Pcap(p) => p.next_raw_packet(avail).map(|(rest, pkt)| {
                    deliver(&pkt.data);
                    (avail.len() - rest.len(), true)
                }),
                Format::PcapNg { parser, linktypes } => parser.next_block(avail).map(|(rest, block)| {
                    let ethernet = |id: u32| linktypes.get(id as usize) == Some(&DataLink::ETHERNET);
                    let got = match block {
                        Block::SectionHeader(_) => {
                            linktypes.clear();
                            false
                        }
                        Block::InterfaceDescription(idb) => {
                            linktypes.push(idb.linktype);
                            false
                        }
                        Block::EnhancedPacket(epb) if ethernet(epb.interface_id) => {
                            deliver(&epb.data);
                            true
                        }
                        Block::SimplePacket(spb) if ethernet(0) => {
                            deliver(&spb.data);
                            true
                        }
                        _ => false,
                    };
                    (avail.len() - rest.len(), got)
                }),
            };
            match parsed {
                Ok((used, got)) => {
                    self.start += used;
                    if got {
                        self.packets += 1;
                        return Ok(true);
                    }
                }
                Err(PcapError::IncompleteBuffer) if self.eof && self.start == self.buf.len() => return Ok(false),
                Err(PcapError::IncompleteBuffer) if !self.eof => self.refill()?,
                Err(e) => {
                    return Err(format!(
                        "packet {} (byte {}): {}",
                        self.packets + 1,
                        self.base + self.start as u64,
                        describe(&e)
                    ))
                }
            }
        }
    }

    /// Back to the start of the input (another loop); false when it cannot seek.
    fn rewind(&mut self) -> Result<bool, String> {
        if self.src.seek(SeekFrom::Start(0)).is_err() {
            return Ok(false);
        }
        self.buf.clear();
        (self.start, self.base, self.eof) = (0, 0, false);
        self.header()?;
        Ok(true)
    }
}

/// Whether `path` is read whole (a regular file up to [`IN_MEMORY_LIMIT`]) rather than streamed.
pub(crate) fn in_memory(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() <= IN_MEMORY_LIMIT)
}

/// Opens `path` for streaming over `queues` queues: the header is checked now, the reader
/// thread started.
pub(crate) fn open(path: &Path, queues: usize, loops: u64) -> Result<Vec<StreamRx>, PortError> {
    let name = path.display().to_string();
    let parser = Parser::open(path).map_err(|message| PortError::Pcap { path: name.clone(), message })?;
    let (senders, receivers): (Vec<SyncSender<Batch>>, Vec<Receiver<Batch>>) =
        (0..queues).map(|_| sync_channel(QUEUED)).unzip();
    std::thread::Builder::new()
        .name("pcap-in".into())
        .spawn(move || read(parser, &senders, loops.max(1)))
        .map_err(|e| PortError::Pcap { path: name, message: format!("starting its reader thread: {e}") })?;
    Ok(receivers.into_iter().map(|rx| StreamRx { rx, cur: None, pos: 0 }).collect())
}

/// The reader thread: frames to their queues' batches (by [`flow_hash`]), `loops` times.
fn read(mut p: Parser, senders: &[SyncSender<Batch>], loops: u64) {
    let mut batches: Vec<Batch> = senders.iter().map(|_| Batch::new()).collect();
    let n = senders.len();
    let send = |b: &mut Batch, s: &SyncSender<Batch>| s.send(std::mem::replace(b, Batch::new())).is_ok();
    let mut error = None;
    'passes: for pass in 0..loops {
        if pass > 0 {
            match p.rewind() {
                Ok(true) => {}
                Ok(false) => {
                    error = Some(format!("{}: cannot seek to loop over it again; read once", p.name));
                    break;
                }
                Err(e) => {
                    error = Some(format!("{}: {e}", p.name));
                    break;
                }
            }
        }
        loop {
            let mut q = 0;
            let got = p.next(|frame| {
                q = if n == 1 { 0 } else { flow_hash(frame) as usize % n };
                let b = &mut batches[q];
                b.bytes.extend_from_slice(frame);
                b.ends.push(b.bytes.len());
            });
            match got {
                Ok(true) => {
                    if batches[q].full() && !send(&mut batches[q], &senders[q]) {
                        return; // the port is closed
                    }
                }
                Ok(false) => break,
                Err(e) => {
                    error = Some(format!("{}: {e}", p.name));
                    break 'passes;
                }
            }
        }
    }
    for (b, s) in batches.iter_mut().zip(senders) {
        if !b.ends.is_empty() && !send(b, s) {
            return;
        }
        if let Some(e) = &error {
            let _ = s.send(Batch { error: Some(e.clone()), ..Batch::new() });
        }
    }
}

/// What a streamed queue's poll found.
pub(crate) enum Next<'a> {
    Frame(&'a [u8]),
    /// Nothing yet (the reader has not caught up).
    Empty,
    /// The input ended early, with this reason (then [`Next::End`]).
    Failed(String),
    End,
}

/// One queue of a streamed `pcap-in` port.
pub(crate) struct StreamRx {
    rx: Receiver<Batch>,
    cur: Option<Batch>,
    pos: usize,
}

impl StreamRx {
    /// The next frame of this queue, never waiting.
    pub(crate) fn next(&mut self) -> Next<'_> {
        loop {
            if self.cur.as_ref().is_some_and(|b| self.pos < b.ends.len()) {
                self.pos += 1;
                let b = self.cur.as_ref().expect("just checked");
                return Next::Frame(b.get(self.pos - 1));
            }
            match self.rx.try_recv() {
                Ok(b) => {
                    if let Some(e) = b.error {
                        return Next::Failed(e);
                    }
                    (self.cur, self.pos) = (Some(b), 0);
                }
                Err(TryRecvError::Empty) => return Next::Empty,
                Err(TryRecvError::Disconnected) => return Next::End,
            }
        }
    }
}
