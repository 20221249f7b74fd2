//! A database schema (RFC 7047 §3.2), as much of it as a client checks: the name, the version,
//! the tables and their columns.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::datum::short;
use crate::error::{Error, Result};

/// `MAJOR.MINOR.PATCH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    pub fn parse(s: &str) -> Option<Version> {
        let mut it = s.split('.').map(|p| p.parse::<u32>().ok());
        let v = Version(it.next()??, it.next()??, it.next()??);
        it.next().is_none().then_some(v)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    pub name: String,
    pub version: Version,
    /// Table → its columns (name → the column's `type`, as the schema writes it).
    pub tables: BTreeMap<String, BTreeMap<String, Value>>,
}

impl Schema {
    pub fn from_json(v: &Value) -> Result<Schema> {
        let bad = |what: &str| Error::Schema(format!("{what} (in {})", short(v)));
        let name = v.get("name").and_then(Value::as_str).ok_or_else(|| bad("no 'name'"))?.to_string();
        let vs = v.get("version").and_then(Value::as_str).ok_or_else(|| bad("no 'version'"))?;
        let version = Version::parse(vs).ok_or_else(|| bad(&format!("version '{vs}' is not MAJOR.MINOR.PATCH")))?;
        let tables_json = v.get("tables").and_then(Value::as_object).ok_or_else(|| bad("no 'tables' object"))?;
        let mut tables = BTreeMap::new();
        for (t, tv) in tables_json {
            let cols = tv
                .get("columns")
                .and_then(Value::as_object)
                .ok_or_else(|| bad(&format!("table '{t}' has no 'columns' object")))?;
            tables.insert(
                t.clone(),
                cols.iter().map(|(c, ty)| (c.clone(), ty.get("type").cloned().unwrap_or(Value::Null))).collect(),
            );
        }
        Ok(Schema { name, version, tables })
    }

    /// Checks that this is database `name`, with the same major version as `min` and at least
    /// `min`, and that it has each of `tables` with each of its columns (`(table, columns)`).
    pub fn check(&self, name: &str, min: Version, tables: &[(&str, &[&str])]) -> Result<()> {
        if self.name != name {
            return Err(Error::Schema(format!("the database is '{}', expected '{name}'", self.name)));
        }
        if self.version.0 != min.0 || self.version < min {
            return Err(Error::Schema(format!(
                "database {name} has schema version {}, expected {}.x.y at least {min}",
                self.version, min.0
            )));
        }
        for (t, cols) in tables {
            let Some(have) = self.tables.get(*t) else {
                return Err(Error::Schema(format!("database {name} (version {}) has no table '{t}'", self.version)));
            };
            if let Some(c) = cols.iter().find(|c| !have.contains_key(**c)) {
                return Err(Error::Schema(format!("table {t} of database {name} has no column '{c}'")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_and_checks() {
        assert_eq!(Version::parse("8.3.1"), Some(Version(8, 3, 1)));
        for bad in ["8.3", "8.3.1.2", "a.b.c", ""] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
        let s = Schema::from_json(&json!({"name": "Open_vSwitch", "version": "8.3.1",
            "tables": {"Bridge": {"columns": {"name": {"type": "string"}}}}}))
        .unwrap();
        s.check("Open_vSwitch", Version(8, 0, 0), &[("Bridge", &["name"])]).unwrap();
        for (name, min, tables) in [
            ("Other", Version(8, 0, 0), &[][..]),
            ("Open_vSwitch", Version(7, 0, 0), &[][..]),
            ("Open_vSwitch", Version(8, 4, 0), &[][..]),
            ("Open_vSwitch", Version(8, 0, 0), &[("Port", &[][..])][..]),
            ("Open_vSwitch", Version(8, 0, 0), &[("Bridge", &["ports"][..])][..]),
        ] {
            assert!(matches!(s.check(name, min, tables), Err(Error::Schema(_))), "{name} {min} {tables:?}");
        }
        for bad in [
            json!({}),
            json!({"name": "x", "version": "1", "tables": {}}),
            json!({"name": "x", "version": "1.0.0", "tables": {"T": {}}}),
        ] {
            assert!(Schema::from_json(&bad).is_err(), "{bad}");
        }
    }
}
