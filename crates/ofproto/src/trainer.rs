//! One trainer thread for many models — the paper's §6 ("a single trainer thread for all
//! models"): the CCACHE PMDs of a switch hand their training jobs to one trainer, which runs
//! them one at a time in the order they came. A CCACHE given no trainer (`rqvs replay`, tests)
//! trains on a thread of its own per training session.
//!
//! The thread lives as long as a [`TrainerHandle`] does: when the last handle is dropped it
//! finishes the job in hand (its result goes nowhere if its PMD is gone) and ends.

use std::sync::mpsc::{channel, Sender};

/// A training job: builds a model and sends it where its owner waits for it.
pub type Job = Box<dyn FnOnce() + Send>;

/// A handle on the trainer thread; clones share the one thread.
#[derive(Clone, Debug)]
pub struct TrainerHandle {
    jobs: Sender<Job>,
}

/// Starts the trainer thread (named `trainer`).
pub fn spawn_trainer() -> std::io::Result<TrainerHandle> {
    let (jobs, queue) = channel::<Job>();
    std::thread::Builder::new().name("trainer".into()).spawn(move || {
        for job in queue {
            job();
        }
    })?;
    Ok(TrainerHandle { jobs })
}

impl TrainerHandle {
    /// Queues `job`; gives it back if the trainer thread is gone.
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        self.jobs.send(job).map_err(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn jobs_from_every_handle_run_on_one_thread_in_order() {
        let a = spawn_trainer().unwrap();
        let b = a.clone();
        let (tx, rx) = channel();
        for i in 0..6 {
            let tx = tx.clone();
            let h = if i % 2 == 0 { &a } else { &b };
            let queued = h.submit(Box::new(move || {
                let me = std::thread::current();
                let _ = tx.send((i, me.id(), me.name().map(str::to_string)));
            }));
            assert!(queued.is_ok());
        }
        drop(tx);
        let got: Vec<_> = rx.iter().collect();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), (0..6).collect::<Vec<_>>());
        assert!(got.iter().all(|g| g.1 == got[0].1 && g.1 != std::thread::current().id()));
        assert_eq!(got[0].2.as_deref(), Some("trainer"));
    }
}
