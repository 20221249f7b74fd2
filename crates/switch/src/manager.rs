//! The CFLOWS manager thread: the one owner of the learned classifier every CFLOWS PMD reads
//! ([`rqvs_datapath::CflowsPublisher`]). It applies `add-flows`/`del-flows` change sets,
//! swaps in the models its trainer finishes (polling every 10 ms), and publishes each
//! result with one atomic pointer swap; the PMDs pick it up at their next batch.
//!
//! **Test hook** (not for users): the environment variable `RQVS_TEST_REFUSE_PRIORITY` set to
//! a number makes the manager refuse every change set that adds a flow of that priority, as the
//! learned classifier refusing a rule would (nothing changed; the answer is an error) — the
//! refusal no rule of the switch meets otherwise (`check_rules` runs first), for the tests of
//! [`crate::commit_pipeline`] (`crates/cli/tests/openflow_pipelined.rs`). Read once at the
//! thread's start; unset it costs nothing.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use rqvs_datapath::CflowsPublisher;
use rqvs_flow::{Rule, RuleId};
use rqvs_ofproto::DpAction;

/// How often the manager looks for a finished training.
const POLL: Duration = Duration::from_millis(10);

/// A change set for the shared classifier — removals, then additions, published together —
/// answered once published.
pub struct ManagerMsg {
    pub remove: Vec<RuleId>,
    /// Each flow added, with its datapath action (the table of record's, `NetChange::actions`).
    pub add: Vec<(Rule, DpAction)>,
    pub answer: Sender<Result<(), String>>,
}

/// The running manager thread.
pub struct Manager {
    thread: JoinHandle<()>,
}

impl Manager {
    /// Starts the manager over `publisher`; it ends when every sender of its queue is gone.
    /// A panic in it stops the switch (`stop`, [`crate::fault::guard`]).
    pub fn spawn(
        mut publisher: CflowsPublisher,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> std::io::Result<(Manager, Sender<ManagerMsg>)> {
        let (send, recv) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("cflows-manager".into())
            .spawn(move || crate::fault::guard("the CFLOWS manager thread", &stop, || serve(&mut publisher, &recv)))?;
        Ok((Manager { thread }, send))
    }

    /// Waits for the manager to end.
    pub fn join(self) -> bool {
        self.thread.join().is_ok()
    }
}

fn serve(publisher: &mut CflowsPublisher, recv: &Receiver<ManagerMsg>) {
    let refuse: Option<u32> = std::env::var("RQVS_TEST_REFUSE_PRIORITY").ok().and_then(|v| v.parse().ok());
    loop {
        match recv.recv_timeout(POLL) {
            Ok(m) if refuse.is_some_and(|p| m.add.iter().any(|(r, _)| r.priority == p)) => {
                let _ = m.answer.send(Err(format!("test hook: a flow of priority {} refused", refuse.unwrap_or(0))));
            }
            Ok(m) => {
                let _ = m.answer.send(publisher.change_acted(&m.remove, m.add).map_err(|e| e.to_string()));
                // The spare catches up after the answer, off the commit's path.
                publisher.catch_up();
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        publisher.poll();
    }
}
