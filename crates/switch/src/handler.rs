//! The handler thread (ORIG, CCACHE): one thread serving the upcalls of every PMD, as in the
//! paper's §6 and OVS's kernel-datapath arrangement.
//!
//! A PMD takes what its fast path missed ([`rqvs_datapath::Design::take_upcalls`]), copies the
//! frames, and sends them as one [`UpcallBatch`] through the handler's bounded queue
//! ([`HANDLER_QUEUE`] batches, shared by all PMDs; a PMD also keeps at most its upcall-queue
//! capacity of packets in flight). A full queue refuses the batch without waiting: its packets
//! are lost, counted `lost` on their port and in the PMD's datapath counters — OVS's "miss with
//! failed upcall". The handler classifies each packet with the shared OpenFlow table (one read
//! of the table per upcall, wildcard tracking), and sends the batch back to its PMD with the
//! verdicts and the table versions they came from. Between its own batches the PMD installs the megaflows,
//! applies the actions to the frames and sends them ([`crate::pmd`]).
//!
//! **Stale verdicts.** A verdict computed from a table older than one the PMD has already
//! revalidated against is applied to its packet (the packet was classified while the change
//! was being applied: within the revalidation window) but its megaflow is not installed —
//! it could otherwise outlive the revalidation that would have removed it.
//!
//! **Order.** Packets of one flow that missed are answered in order (one FIFO handler), but a
//! packet that arrives after the flow's megaflow was installed can leave before earlier packets
//! of the flow still waiting for the handler: the reordering OVS's kernel datapath has too.
//! `--upcalls inline` (OVS-DPDK's arrangement: the PMD runs the slow path itself) has none.
//!
//! **Offline ports.** When every receive queue of a PMD is an offline (pcap) port, the PMD waits
//! for room instead of losing packets: a file can be read no faster than it is switched.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use rqvs_datapath::upcall::Upcall;
use rqvs_ofproto::table::Verdict;
use rqvs_ofproto::OfprotoTable;

/// Batches the handler's queue holds (all PMDs together).
pub const HANDLER_QUEUE: usize = 256;

/// One packet waiting for the slow path, with its frame.
pub struct UpcallItem {
    pub upcall: Upcall,
    /// Index of the port it came in on (OpenFlow port − 1).
    pub port: usize,
    pub frame: Vec<u8>,
    /// The patch crossings the frame had made when it came in ([`crate::crossing`], *Loops*).
    pub crossings: u8,
    /// The handler's answer, and the version of the table it came from.
    pub verdict: Option<(Verdict, u64)>,
}

/// Upcalls of one PMD, to the handler and back.
pub struct UpcallBatch {
    pub pmd: usize,
    pub items: Vec<UpcallItem>,
}

/// The handler's counters.
#[derive(Default)]
pub struct HandlerStats {
    pub batches: AtomicU64,
    pub upcalls: AtomicU64,
    pub busy_ns: AtomicU64,
}

/// The running handler thread.
pub struct Handler {
    thread: JoinHandle<()>,
    pub stats: Arc<HandlerStats>,
}

impl Handler {
    /// Starts the handler over `table`, answering PMD `i` on `replies[i]`. Returns it and the
    /// sending side of its queue (one clone per PMD); it ends when every sender is gone.
    /// A panic in it stops the switch (`stop`, [`crate::fault::guard`]).
    pub fn spawn(
        table: OfprotoTable,
        replies: Vec<Sender<UpcallBatch>>,
        stop: Arc<std::sync::atomic::AtomicBool>,
    ) -> std::io::Result<(Handler, SyncSender<UpcallBatch>)> {
        let (send, recv) = std::sync::mpsc::sync_channel(HANDLER_QUEUE);
        let stats = Arc::new(HandlerStats::default());
        let s = stats.clone();
        let thread = std::thread::Builder::new()
            .name("handler".into())
            .spawn(move || crate::fault::guard("the handler thread", &stop, || serve(&table, &recv, &replies, &s)))?;
        Ok((Handler { thread, stats }, send))
    }

    /// Waits for the handler to end (after the PMDs, which hold its queue's senders).
    pub fn join(self) -> bool {
        self.thread.join().is_ok()
    }
}

fn serve(table: &OfprotoTable, recv: &Receiver<UpcallBatch>, replies: &[Sender<UpcallBatch>], stats: &HandlerStats) {
    let test_panic = crate::fault::test_panic("handler");
    while let Ok(mut b) = recv.recv() {
        if test_panic {
            panic!("RQVS_TEST_PANIC=handler: the handler's test panic");
        }
        let t0 = Instant::now();
        // One read of the table per upcall, each verdict with the version it came from: a
        // commit waits for one lookup, not the whole batch (`rqvs_ofproto::table`, *Concurrency*).
        for it in &mut b.items {
            let t = table.read();
            it.verdict = Some((t.classify(&it.upcall.key), t.version()));
        }
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats.upcalls.fetch_add(b.items.len() as u64, Ordering::Relaxed);
        stats.busy_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        // A PMD that is gone no longer needs its answers.
        if let Some(r) = replies.get(b.pmd) {
            let _ = r.send(b);
        }
    }
}
