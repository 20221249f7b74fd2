//! The CFLOWS manager thread: the one owner of the learned classifier every CFLOWS PMD reads
//! ([`rqvs_datapath::CflowsPublisher`]). It applies `add-flows`/`del-flows` change sets,
//! swaps in the models its trainer finishes (polling every 10 ms), and publishes each
//! result with one atomic pointer swap; the PMDs pick it up at their next batch.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use rqvs_datapath::CflowsPublisher;
use rqvs_flow::{Rule, RuleId};

/// How often the manager looks for a finished training.
const POLL: Duration = Duration::from_millis(10);

/// A change set for the shared classifier — removals, then additions, published together —
/// answered once published.
pub struct ManagerMsg {
    pub remove: Vec<RuleId>,
    pub add: Vec<Rule>,
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
    loop {
        match recv.recv_timeout(POLL) {
            Ok(m) => {
                let _ = m.answer.send(publisher.change(&m.remove, m.add).map_err(|e| e.to_string()));
                // The spare catches up after the answer, off the commit's path.
                publisher.catch_up();
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        publisher.poll();
    }
}
