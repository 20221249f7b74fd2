//! Rules, their actions, and the one winner rule used everywhere in rqvs.
//!
//! **Winner rule.** Among the rules a packet matches, the one with the *highest priority* wins;
//! between equal priorities the *lowest id* wins. Every classifier, cache and test in rqvs uses this
//! rule, through [`Rule::beats`] or [`Rule::rank`]. ClassBench files are first-match lists: rule `i`
//! (0-based line) gets id `i` and priority `n - i`, so the first matching line wins.

use std::cmp::Reverse;
use std::fmt;

use crate::matching::Match;

/// A rule's identity within one rule-set (ClassBench line index, or ofctl flow index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RuleId(pub u32);

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One action of a rule. Actions rqvs does not execute are kept verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// `output:N`
    Output(u32),
    /// `drop`
    Drop,
    /// `controller` or `controller:MAX_LEN`
    Controller(Option<u16>),
    /// Anything else (`mod_vlan_vid:3`, `resubmit(,1)`, ...), exactly as written.
    Other(String),
}

/// A rule's action list, in order. An empty list means drop, as in OpenFlow.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Actions(pub Vec<Action>);

impl Actions {
    pub fn drop() -> Actions {
        Actions(vec![Action::Drop])
    }

    pub fn output(port: u32) -> Actions {
        Actions(vec![Action::Output(port)])
    }

    /// True when the packet leaves on no port (empty list, or only `drop`).
    pub fn is_drop(&self) -> bool {
        self.0.iter().all(|a| matches!(a, Action::Drop))
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Output(p) => write!(f, "output:{p}"),
            Action::Drop => f.write_str("drop"),
            Action::Controller(None) => f.write_str("controller"),
            Action::Controller(Some(n)) => write!(f, "controller:{n}"),
            Action::Other(s) => f.write_str(s),
        }
    }
}

impl fmt::Display for Actions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("drop");
        }
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

/// A classification rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    pub id: RuleId,
    /// Higher wins. OpenFlow priorities fit in 16 bits; ClassBench sets may need more.
    pub priority: u32,
    pub matches: Match,
    pub actions: Actions,
    /// OpenFlow cookie (0 when the rule did not come from OpenFlow).
    pub cookie: u64,
    /// OpenFlow table (0 by default).
    pub table: u8,
}

impl Rule {
    pub fn new(id: u32, priority: u32, matches: Match, actions: Actions) -> Rule {
        Rule { id: RuleId(id), priority, matches, actions, cookie: 0, table: 0 }
    }

    /// The sort key of the winner rule: smaller ranks first (higher priority, then lower id).
    #[inline]
    pub fn rank(&self) -> (Reverse<u32>, RuleId) {
        (Reverse(self.priority), self.id)
    }

    /// True when `self` wins over `other` for a packet both match.
    #[inline]
    pub fn beats(&self, other: &Rule) -> bool {
        self.rank() < other.rank()
    }
}

/// The winner rule on bare (priority, id) pairs, for classifiers that keep rules elsewhere.
#[inline]
pub fn beats(priority: u32, id: RuleId, other_priority: u32, other_id: RuleId) -> bool {
    (Reverse(priority), id) < (Reverse(other_priority), other_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn winner_rule() {
        let a = Rule::new(5, 10, Match::ANY, Actions::drop());
        let b = Rule::new(3, 10, Match::ANY, Actions::drop());
        let c = Rule::new(9, 11, Match::ANY, Actions::drop());
        assert!(b.beats(&a), "equal priority: lower id wins");
        assert!(c.beats(&a) && c.beats(&b), "higher priority wins");
        assert!(!a.beats(&a));
        assert!(beats(11, RuleId(9), 10, RuleId(3)));
    }

    #[test]
    fn actions_display() {
        assert_eq!(Actions::default().to_string(), "drop");
        let a = Actions(vec![Action::Output(2), Action::Controller(Some(128)), Action::Other("resubmit(,1)".into())]);
        assert_eq!(a.to_string(), "output:2,controller:128,resubmit(,1)");
        assert!(!a.is_drop());
        assert!(Actions::drop().is_drop());
    }
}
