//! The action table's freeing (issue 40; `rqvs_ofproto::actions`, *Freeing*), in a process of
//! its own: the table is process-wide, and these tests register readers and collect.
//!
//! - a list is freed only once it has no hold, every reader has passed a quiescent point since,
//!   and [`actions::GRACE`] has passed; its id then reads as gone (never as the list that takes
//!   its slot), and a hold of it fails;
//! - a list that runs another (a group's clone) holds it;
//! - under a loop that interns, holds and releases 10^5 distinct lists while reader threads read
//!   held ones, every read is the right list and the table stays bounded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rqvs_ofproto::actions::{self, ActionsId, Op, Reader};

/// One test at a time: they count the table's lists and frees.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn list(tag: u32, n: u32) -> Vec<Op> {
    vec![Op::SetVlanVid((tag & 0xfff) as u16), Op::Output(n), Op::Output(tag)]
}

/// Collects, with the reader quiescent around it, until `id`'s list is gone or `limit` passes.
fn collect_until_gone(r: &Reader, id: ActionsId, limit: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        r.quiescent();
        actions::collect();
        if actions::ops(id).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn an_unheld_list_is_freed_after_every_reader_passed_and_the_grace() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = Reader::register();
    let a = list(7, 1_000_001);
    let id = actions::intern(&a);
    assert!(actions::hold(id));
    // Held: never freed, however long.
    let t = Instant::now();
    while t.elapsed() < actions::GRACE + Duration::from_millis(200) {
        r.quiescent();
        actions::collect();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(&*actions::ops(id), &a[..], "a held list stays");
    actions::release(id);
    // Released, but a second reader that never passes a quiescent point keeps it.
    let stuck = Reader::register();
    let t = Instant::now();
    while t.elapsed() < actions::GRACE + Duration::from_millis(200) {
        r.quiescent();
        actions::collect();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(&*actions::ops(id), &a[..], "a reader that has not passed a quiescent point keeps it");
    // Within the grace after the reader passed: still there (it was interned again, which
    // restarts the grace).
    assert_eq!(actions::intern(&a), id, "still held: the same id");
    stuck.quiescent();
    r.quiescent();
    actions::collect();
    assert_eq!(&*actions::ops(id), &a[..], "within the grace");
    drop(stuck);
    let freed = actions::stats().freed;
    assert!(collect_until_gone(&r, id, actions::GRACE * 3), "freed after the grace");
    assert!(actions::stats().freed > freed);
    let stale = actions::stats().stale;
    assert!(!actions::hold(id), "a hold of a freed list fails");
    assert!(actions::stats().stale > stale, "and is counted stale");
    // The slot goes to the next new list, under another id; the old id still reads as gone.
    let b = list(8, 1_000_002);
    let id_b = actions::intern(&b);
    assert_ne!(id_b, id);
    assert!(actions::ops(id).is_empty(), "a freed id never reads as another list");
    assert_eq!(&*actions::ops(id_b), &b[..]);
    // Interning the first list again gives it a new id.
    let again = actions::intern(&a);
    assert_ne!(again, id);
    assert_eq!(&*actions::ops(again), &a[..]);
    assert_eq!(actions::stats().unbalanced, 0);
}

#[test]
fn a_list_holds_the_lists_it_clones() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = Reader::register();
    let bucket = list(9, 2_000_001);
    let inner = actions::intern(&bucket);
    let outer_ops = vec![Op::Clone(inner), Op::Output(2_000_002)];
    let outer = actions::intern(&outer_ops);
    assert!(actions::hold(outer));
    // The bucket has no hold of its own: the outer list's keeps it.
    let t = Instant::now();
    while t.elapsed() < actions::GRACE + Duration::from_millis(300) {
        r.quiescent();
        actions::collect();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(&*actions::ops(inner), &bucket[..], "held by the list that clones it");
    actions::release(outer);
    assert!(collect_until_gone(&r, outer, actions::GRACE * 3));
    assert!(collect_until_gone(&r, inner, actions::GRACE * 3), "freed with the list that cloned it");
    assert_eq!(actions::stats().unbalanced, 0);
}

#[test]
fn churn_of_distinct_lists_stays_bounded_and_reads_stay_right() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    const LISTS: u32 = 100_000;
    // The flows live at a time (each holds its list); each step replaces the oldest.
    const LIVE: usize = 1024;
    // The readers are shown the newest flows every STEP steps: those still held STEP steps on.
    const STEP: u32 = 256;
    let start = actions::stats();
    let stop = Arc::new(AtomicBool::new(false));
    // What the "flows" hold now, for the readers to read (an id and the tag its list says).
    let current: Arc<Mutex<Vec<(ActionsId, u32)>>> = Arc::new(Mutex::new(Vec::new()));
    let readers: Vec<_> = (0..2)
        .map(|k| {
            let (stop, current) = (stop.clone(), current.clone());
            std::thread::spawn(move || {
                let r = Reader::register();
                let (mut reads, mut seed) = (0u64, k as usize);
                while !stop.load(Ordering::Relaxed) {
                    r.quiescent();
                    // A batch: ids taken from the holders, read after the holders may have
                    // released them (the reader has not passed a quiescent point since).
                    let batch: Vec<(ActionsId, u32)> = {
                        let c = current.lock().unwrap();
                        (0..8).filter_map(|j| c.get((seed + j * 7) % c.len().max(1)).copied()).collect()
                    };
                    seed = seed.wrapping_add(13);
                    std::thread::yield_now();
                    for (id, tag) in batch {
                        assert_eq!(&*actions::ops(id), &list(tag, tag ^ 0x5555)[..], "reader {k}: id {id:?}");
                        reads += 1;
                    }
                }
                reads
            })
        })
        .collect();
    let t = Instant::now();
    let mut peak = 0usize;
    let mut live: std::collections::VecDeque<(ActionsId, u32)> = Default::default();
    let r = Reader::register();
    for i in 0..LISTS {
        let tag = 3_000_000 + i;
        let id = actions::intern(&list(tag, tag ^ 0x5555));
        assert!(actions::hold(id), "a list just interned is there");
        live.push_back((id, tag));
        if live.len() > LIVE {
            let (old, _) = live.pop_front().unwrap();
            actions::release(old);
        }
        // Paced (about 20,000 lists a second, some five graces in all): the table must free
        // during the run to stay bounded.
        if i % 20 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        if i % STEP == 0 {
            *current.lock().unwrap() = live.iter().rev().take(LIVE - STEP as usize).copied().collect();
            r.quiescent();
            peak = peak.max(actions::stats().lists);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    let took = t.elapsed();
    for (id, _) in live.drain(..) {
        actions::release(id);
    }
    // Everything released: after the grace the table is back where it started.
    let deadline = Instant::now() + actions::GRACE * 4;
    while actions::stats().lists > start.lists && Instant::now() < deadline {
        r.quiescent();
        actions::collect();
        std::thread::sleep(Duration::from_millis(20));
    }
    let end = actions::stats();
    eprintln!(
        "{LISTS} lists interned, held and released in {:.2} s; {reads} reads; table {} lists at the start, peak {peak}, {} at the end; {} freed",
        took.as_secs_f64(),
        start.lists,
        end.lists,
        end.freed - start.freed
    );
    assert!(reads > 0);
    // Bounded: the lists held plus those released within about the grace (and a collection's
    // period), never the 10^5.
    let rate = f64::from(LISTS) / took.as_secs_f64().max(1e-3);
    let bound = start.lists + LIVE + (rate * (actions::GRACE.as_secs_f64() + 0.5)) as usize + 1024;
    assert!(peak <= bound, "peak {peak} lists, bound {bound}");
    assert!(peak < LISTS as usize / 2, "peak {peak}: the table did not free during the run");
    assert!(end.lists <= start.lists, "every list released was freed");
    assert!(end.freed - start.freed >= u64::from(LISTS));
    assert_eq!(end.stale, start.stale, "no read of a freed list");
    assert_eq!(end.unbalanced, 0);
}
