//! A batch's keys as the fast paths take them: [`NarrowKey`]s when every packet of the batch has
//! no wide field (every 5-tuple batch: 40 bytes a key where a whole [`FlowKey`] takes 112 — what
//! OVS's miniflow does for a packet), whole keys otherwise. The hash, the EMC, the megaflow
//! lookup's words and the classifiers' batch lookups each have a form for both, so one generic
//! body serves either ([`crate::cflows`]'s fast path, [`crate::orig`]'s batch).

use rqvs_classify::Classifier;
use rqvs_flow::key::{KeyWords, NarrowKey, KEY_WORDS, NARROW_WORDS};
use rqvs_flow::{FlowKey, RuleId};

use crate::emc::{Emc, EmcRef, EmcTarget};
use crate::{flow_hash, flow_hash_narrow, BATCH};

/// A key of a batch (module docs).
pub trait BatchKey: Copy + Default {
    /// [`flow_hash`] of the key.
    fn hash(&self) -> u32;
    fn emc_lookup<R: EmcRef>(&self, emc: &Emc<R>, hash: u32, owner: &impl EmcTarget<R>) -> Option<R>;
    fn emc_insert<R: EmcRef>(&self, emc: &mut Emc<R>, hash: u32, r: R, owner: &impl EmcTarget<R>);
    /// [`FlowKey::to_words`] of the key.
    fn words(&self) -> KeyWords;
    /// The whole key.
    fn whole(&self) -> FlowKey;
    /// [`Classifier::lookup_batch`] of keys of this form.
    fn lookup_batch<C: Classifier + ?Sized>(c: &C, keys: &[Self], ids: &mut [Option<RuleId>]);
}

impl BatchKey for NarrowKey {
    #[inline(always)]
    fn hash(&self) -> u32 {
        flow_hash_narrow(self)
    }
    #[inline(always)]
    fn emc_lookup<R: EmcRef>(&self, emc: &Emc<R>, hash: u32, owner: &impl EmcTarget<R>) -> Option<R> {
        emc.lookup_narrow(hash, self, owner)
    }
    #[inline(always)]
    fn emc_insert<R: EmcRef>(&self, emc: &mut Emc<R>, hash: u32, r: R, owner: &impl EmcTarget<R>) {
        emc.probabilistic_insert_narrow(hash, self, r, owner)
    }
    #[inline(always)]
    fn words(&self) -> KeyWords {
        let n = self.to_narrow_words();
        let mut w = [0; KEY_WORDS];
        w[..NARROW_WORDS].copy_from_slice(&n);
        w
    }
    #[inline(always)]
    fn whole(&self) -> FlowKey {
        self.widen()
    }
    #[inline(always)]
    fn lookup_batch<C: Classifier + ?Sized>(c: &C, keys: &[Self], ids: &mut [Option<RuleId>]) {
        c.lookup_batch_narrow(keys, ids)
    }
}

impl BatchKey for FlowKey {
    #[inline(always)]
    fn hash(&self) -> u32 {
        flow_hash(self)
    }
    #[inline(always)]
    fn emc_lookup<R: EmcRef>(&self, emc: &Emc<R>, hash: u32, owner: &impl EmcTarget<R>) -> Option<R> {
        emc.lookup(hash, self, owner)
    }
    #[inline(always)]
    fn emc_insert<R: EmcRef>(&self, emc: &mut Emc<R>, hash: u32, r: R, owner: &impl EmcTarget<R>) {
        emc.probabilistic_insert(hash, self, r, owner)
    }
    #[inline(always)]
    fn words(&self) -> KeyWords {
        self.to_words()
    }
    #[inline(always)]
    fn whole(&self) -> FlowKey {
        *self
    }
    #[inline(always)]
    fn lookup_batch<C: Classifier + ?Sized>(c: &C, keys: &[Self], ids: &mut [Option<RuleId>]) {
        c.lookup_batch(keys, ids)
    }
}

/// The batch `keys` (put on the wire first when `wire`: [`FlowKey::wire`]) as narrow keys in
/// `narrow`, when every one of them is narrow; false (and `narrow` partly written) otherwise.
#[inline]
pub fn narrow_batch(keys: &[FlowKey], wire: bool, narrow: &mut [NarrowKey; BATCH]) -> bool {
    for (k, n) in keys.iter().zip(narrow.iter_mut()) {
        match if wire { k.wire_narrow() } else { k.narrow() } {
            Some(x) => *n = x,
            None => return false,
        }
    }
    true
}

/// The batch `keys` as whole keys (put on the wire first when `wire`).
#[inline]
pub fn whole_batch(keys: &[FlowKey], wire: bool, whole: &mut [FlowKey; BATCH]) {
    for (k, w) in keys.iter().zip(whole.iter_mut()) {
        *w = if wire { k.wire() } else { *k };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two forms agree: hash, words and the whole key.
    #[test]
    fn narrow_and_whole_forms_agree() {
        let mut k = FlowKey::ipv4(0x0a00_0001, 0x0a00_0002, 6, 80, 443);
        k.dl_src = [2, 0, 0, 0, 0, 7];
        k.vlan_tci = 0x1005;
        let n = k.narrow().expect("narrow");
        assert_eq!(BatchKey::hash(&n), BatchKey::hash(&k));
        assert_eq!(BatchKey::words(&n), BatchKey::words(&k));
        assert_eq!(n.whole(), k);
        let mut batch = [NarrowKey::default(); BATCH];
        assert!(narrow_batch(&[k, k], true, &mut batch));
        assert_eq!(batch[1], k.wire().narrow().expect("narrow"));
        let v6 = FlowKey::ipv6(1, 2, 17, 5, 6);
        assert!(!narrow_batch(&[k, v6], true, &mut batch));
    }
}
