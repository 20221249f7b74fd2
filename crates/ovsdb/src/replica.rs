//! The in-memory copy of the monitored tables, kept by `monitor`'s initial contents and its
//! `update` notifications (RFC 7047 §4.1.5–6).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::datum::{short, Row, Uuid};
use crate::error::{context, protocol, Result};

/// Table name → rows by UUID.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replica {
    tables: BTreeMap<String, BTreeMap<Uuid, Row>>,
}

impl Replica {
    pub fn new() -> Replica {
        Replica::default()
    }

    /// The rows of `table` (none when it is not monitored or empty).
    pub fn rows(&self, table: &str) -> impl Iterator<Item = (&Uuid, &Row)> {
        self.tables.get(table).into_iter().flat_map(|t| t.iter())
    }

    pub fn row(&self, table: &str, uuid: &Uuid) -> Option<&Row> {
        self.tables.get(table)?.get(uuid)
    }

    pub fn len(&self, table: &str) -> usize {
        self.tables.get(table).map_or(0, BTreeMap::len)
    }

    pub fn is_empty(&self) -> bool {
        self.tables.values().all(BTreeMap::is_empty)
    }

    /// The first row of `table` whose string column `column` is `value` (e.g. a bridge by name).
    pub fn find(&self, table: &str, column: &str, value: &str) -> Option<(&Uuid, &Row)> {
        self.rows(table).find(|(_, r)| r.str(column) == Some(value))
    }

    /// Applies a `<table-updates>` object: per table, per row UUID, `{"old": ..., "new": ...}`;
    /// no `new` deletes the row, otherwise `new` (all monitored columns) replaces it. The whole
    /// update is checked before any of it is applied, so a malformed one changes nothing.
    pub fn apply(&mut self, updates: &Value) -> Result<()> {
        let obj =
            updates.as_object().ok_or_else(|| protocol(format!("expected table updates, found {}", short(updates))))?;
        let mut parsed = Vec::new();
        for (table, rows) in obj {
            let rows = rows
                .as_object()
                .ok_or_else(|| protocol(format!("table {table}: expected row updates, found {}", short(rows))))?;
            for (uuid, change) in rows {
                let uuid = Uuid::parse(uuid).map_err(context(&format!("table {table}")))?;
                let change = change
                    .as_object()
                    .ok_or_else(|| protocol(format!("table {table} row {uuid}: expected {{\"old\", \"new\"}}")))?;
                let new = match change.get("new") {
                    None | Some(Value::Null) => None,
                    Some(n) => Some(Row::from_json(n).map_err(context(&format!("table {table} row {uuid}")))?),
                };
                parsed.push((table.clone(), uuid, new));
            }
        }
        for (table, uuid, new) in parsed {
            let t = self.tables.entry(table).or_default();
            match new {
                Some(row) => {
                    t.insert(uuid, row);
                }
                None => {
                    t.remove(&uuid);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const U1: &str = "00000000-0000-0000-0000-000000000001";
    const U2: &str = "00000000-0000-0000-0000-000000000002";

    #[test]
    fn insert_modify_delete() {
        let mut r = Replica::new();
        r.apply(&json!({"Bridge": {U1: {"new": {"name": "br0", "ports": ["set", []]}}, U2: {"new": {"name": "br1"}}}}))
            .unwrap();
        assert_eq!(r.len("Bridge"), 2);
        assert_eq!(r.find("Bridge", "name", "br1").unwrap().0.as_str(), U2);
        r.apply(&json!({"Bridge": {U1: {"old": {"name": "br0"}, "new": {"name": "brX", "ports": ["set", []]}}}}))
            .unwrap();
        assert!(r.find("Bridge", "name", "brX").is_some());
        r.apply(&json!({"Bridge": {U2: {"old": {"name": "br1"}}}})).unwrap();
        assert_eq!(r.len("Bridge"), 1);
        // A malformed update changes nothing, even its well-formed part.
        let before = r.clone();
        assert!(r.apply(&json!({"Bridge": {U2: {"new": {"name": "ok"}}, "not-a-uuid": {"new": {}}}})).is_err());
        assert!(r.apply(&json!({"Bridge": {U2: {"new": {"name": {"x": 1}}}}})).is_err());
        assert!(r.apply(&json!([1])).is_err());
        assert_eq!(r, before);
    }
}
