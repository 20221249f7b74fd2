//! OVSDB values as RFC 7047 §5.1 encodes them: atoms (integer, real, boolean, string, uuid,
//! named-uuid), sets (`["set", [...]]`, or the bare atom when there is exactly one) and maps
//! (`["map", [[k, v], ...]]`), and rows (column → datum). Decoding needs no schema: the
//! encoding says which is which, and anything else is an error naming what was found.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{json, Value};

use crate::error::{protocol, Result};

/// A row's UUID, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in lower-case hex.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(String);

impl Uuid {
    /// Checks the form (RFC 4122 text, any case; kept lower-case).
    pub fn parse(s: &str) -> Result<Uuid> {
        let ok = s.len() == 36
            && s.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_hexdigit(),
            });
        if ok {
            Ok(Uuid(s.to_ascii_lowercase()))
        } else {
            Err(protocol(format!("'{s}' is not a UUID (expected 8-4-4-4-12 hex digits)")))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One atom.
#[derive(Clone, Debug, PartialEq)]
pub enum Atom {
    Integer(i64),
    Real(f64),
    Boolean(bool),
    String(String),
    Uuid(Uuid),
    /// A name for a row inserted earlier in the same transaction (`uuid-name`).
    NamedUuid(String),
}

impl Atom {
    pub fn to_json(&self) -> Value {
        match self {
            Atom::Integer(i) => json!(i),
            Atom::Real(r) => json!(r),
            Atom::Boolean(b) => json!(b),
            Atom::String(s) => json!(s),
            Atom::Uuid(u) => json!(["uuid", u.as_str()]),
            Atom::NamedUuid(n) => json!(["named-uuid", n]),
        }
    }

    pub fn from_json(v: &Value) -> Result<Atom> {
        match v {
            Value::Bool(b) => Ok(Atom::Boolean(*b)),
            Value::String(s) => Ok(Atom::String(s.clone())),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Ok(Atom::Integer(i)),
                None => n.as_f64().map(Atom::Real).ok_or_else(|| protocol(format!("number {n} out of range"))),
            },
            Value::Array(a) if a.len() == 2 && a[0] == "uuid" => {
                let s = a[1].as_str().ok_or_else(|| protocol(format!("expected [\"uuid\", STRING], found {v}")))?;
                Uuid::parse(s).map(Atom::Uuid)
            }
            Value::Array(a) if a.len() == 2 && a[0] == "named-uuid" => a[1]
                .as_str()
                .map(|s| Atom::NamedUuid(s.to_string()))
                .ok_or_else(|| protocol(format!("expected [\"named-uuid\", STRING], found {v}"))),
            _ => Err(protocol(format!("expected an atom (integer, real, boolean, string, uuid), found {}", short(v)))),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Atom::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Atom::Integer(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Atom::Boolean(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_uuid(&self) -> Option<&Uuid> {
        match self {
            Atom::Uuid(u) => Some(u),
            _ => None,
        }
    }
}

impl From<&str> for Atom {
    fn from(s: &str) -> Atom {
        Atom::String(s.to_string())
    }
}
impl From<String> for Atom {
    fn from(s: String) -> Atom {
        Atom::String(s)
    }
}
impl From<i64> for Atom {
    fn from(i: i64) -> Atom {
        Atom::Integer(i)
    }
}
impl From<bool> for Atom {
    fn from(b: bool) -> Atom {
        Atom::Boolean(b)
    }
}
impl From<Uuid> for Atom {
    fn from(u: Uuid) -> Atom {
        Atom::Uuid(u)
    }
}

/// A column's value: a set of atoms (a scalar column is a set of one; an optional one a set of
/// zero or one) or a map.
#[derive(Clone, Debug, PartialEq)]
pub enum Datum {
    Set(Vec<Atom>),
    Map(Vec<(Atom, Atom)>),
}

impl Datum {
    /// The empty set (what clears an optional column).
    pub fn empty() -> Datum {
        Datum::Set(Vec::new())
    }

    /// A set of one atom.
    pub fn one(a: impl Into<Atom>) -> Datum {
        Datum::Set(vec![a.into()])
    }

    pub fn set(atoms: impl IntoIterator<Item = Atom>) -> Datum {
        Datum::Set(atoms.into_iter().collect())
    }

    pub fn map<K: Into<Atom>, V: Into<Atom>>(pairs: impl IntoIterator<Item = (K, V)>) -> Datum {
        Datum::Map(pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }

    pub fn uuid(u: &Uuid) -> Datum {
        Datum::one(Atom::Uuid(u.clone()))
    }

    pub fn named_uuid(name: &str) -> Datum {
        Datum::one(Atom::NamedUuid(name.to_string()))
    }

    pub fn to_json(&self) -> Value {
        match self {
            Datum::Set(a) if a.len() == 1 => a[0].to_json(),
            Datum::Set(a) => json!(["set", a.iter().map(Atom::to_json).collect::<Vec<_>>()]),
            Datum::Map(m) => {
                json!(["map", m.iter().map(|(k, v)| json!([k.to_json(), v.to_json()])).collect::<Vec<_>>()])
            }
        }
    }

    pub fn from_json(v: &Value) -> Result<Datum> {
        if let Value::Array(a) = v {
            if a.len() == 2 && a[0] == "set" {
                let items = a[1]
                    .as_array()
                    .ok_or_else(|| protocol(format!("expected [\"set\", [...]], found {}", short(v))))?;
                return items.iter().map(Atom::from_json).collect::<Result<_>>().map(Datum::Set);
            }
            if a.len() == 2 && a[0] == "map" {
                let items = a[1]
                    .as_array()
                    .ok_or_else(|| protocol(format!("expected [\"map\", [...]], found {}", short(v))))?;
                let pair = |p: &Value| -> Result<(Atom, Atom)> {
                    match p.as_array() {
                        Some(kv) if kv.len() == 2 => Ok((Atom::from_json(&kv[0])?, Atom::from_json(&kv[1])?)),
                        _ => Err(protocol(format!("expected a map pair [KEY, VALUE], found {}", short(p)))),
                    }
                };
                return items.iter().map(pair).collect::<Result<_>>().map(Datum::Map);
            }
        }
        Atom::from_json(v).map(|a| Datum::Set(vec![a]))
    }

    /// The atoms of a set (none for a map).
    pub fn atoms(&self) -> &[Atom] {
        match self {
            Datum::Set(a) => a,
            Datum::Map(_) => &[],
        }
    }

    /// The only atom of a set of one.
    pub fn single(&self) -> Option<&Atom> {
        match self.atoms() {
            [a] => Some(a),
            _ => None,
        }
    }

    /// The pairs of a map (none for a set; an empty map is encoded as an empty set by some
    /// peers, which reads the same).
    pub fn pairs(&self) -> &[(Atom, Atom)] {
        match self {
            Datum::Map(m) => m,
            Datum::Set(_) => &[],
        }
    }

    /// A string → string map's value for `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs().iter().find(|(k, _)| k.as_str() == Some(key)).and_then(|(_, v)| v.as_str())
    }
}

/// One row: column name → datum (the columns monitored or selected; `_uuid` is not among them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row(pub BTreeMap<String, Datum>);

impl Row {
    pub fn new() -> Row {
        Row::default()
    }

    /// Builder: one more column.
    pub fn with(mut self, column: &str, d: Datum) -> Row {
        self.0.insert(column.to_string(), d);
        self
    }

    pub fn insert(&mut self, column: &str, d: Datum) {
        self.0.insert(column.to_string(), d);
    }

    pub fn get(&self, column: &str) -> Option<&Datum> {
        self.0.get(column)
    }

    /// A string column's value (`None` when absent, empty or not a string).
    pub fn str(&self, column: &str) -> Option<&str> {
        self.get(column)?.single()?.as_str()
    }

    pub fn int(&self, column: &str) -> Option<i64> {
        self.get(column)?.single()?.as_i64()
    }

    pub fn bool(&self, column: &str) -> Option<bool> {
        self.get(column)?.single()?.as_bool()
    }

    /// The UUIDs of a reference column (set of uuids).
    pub fn uuids(&self, column: &str) -> Vec<Uuid> {
        self.get(column).map(|d| d.atoms().iter().filter_map(|a| a.as_uuid().cloned()).collect()).unwrap_or_default()
    }

    /// A string → string map column's value for `key`.
    pub fn map_get(&self, column: &str, key: &str) -> Option<&str> {
        self.get(column)?.get(key)
    }

    pub fn to_json(&self) -> Value {
        Value::Object(self.0.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
    }

    /// A row object; `_uuid` and `_version` are left out (the replica keys rows by UUID).
    pub fn from_json(v: &Value) -> Result<Row> {
        let obj = v.as_object().ok_or_else(|| protocol(format!("expected a row object, found {}", short(v))))?;
        let mut row = Row::new();
        for (k, d) in obj {
            if k == "_uuid" || k == "_version" {
                continue;
            }
            let d = Datum::from_json(d).map_err(crate::error::context(&format!("column '{k}'")))?;
            row.0.insert(k.clone(), d);
        }
        Ok(row)
    }
}

/// A value for an error message: at most 80 characters of its JSON.
pub(crate) fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= 80 {
        s
    } else {
        let mut end = 77;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn encodings_round_trip_as_rfc_7047_writes_them() {
        let u = Uuid::parse("0123ABCD-0000-1111-2222-333344445555").unwrap();
        assert_eq!(u.as_str(), "0123abcd-0000-1111-2222-333344445555");
        let cases = [
            (Datum::one("br0"), json!("br0")),
            (Datum::one(7i64), json!(7)),
            (Datum::one(true), json!(true)),
            (Datum::empty(), json!(["set", []])),
            (Datum::uuid(&u), json!(["uuid", u.as_str()])),
            (Datum::named_uuid("new"), json!(["named-uuid", "new"])),
            (Datum::set([Atom::from(1i64), Atom::from(2i64)]), json!(["set", [1, 2]])),
            (Datum::map([("a", "1"), ("b", "x")]), json!(["map", [["a", "1"], ["b", "x"]]])),
            (Datum::one(Atom::Real(1.5)), json!(1.5)),
        ];
        for (d, j) in cases {
            assert_eq!(d.to_json(), j);
            assert_eq!(Datum::from_json(&j).unwrap(), d, "{j}");
        }
        assert_eq!(Datum::map([("k", "v")]).get("k"), Some("v"));
    }

    #[test]
    fn malformed_values_are_errors_that_say_what_was_found() {
        for bad in [
            json!(null),
            json!({"a": 1}),
            json!(["uuid", "nope"]),
            json!(["uuid", 5]),
            json!(["set", 5]),
            json!(["map", [[1]]]),
            json!(["map", 3]),
            json!([1, 2, 3]),
        ] {
            let e = Datum::from_json(&bad).unwrap_err();
            assert!(matches!(e, Error::Protocol(_)), "{bad}: {e}");
        }
        let e = Row::from_json(&json!({"name": "x", "ofport": {"bad": 1}})).unwrap_err();
        assert!(e.to_string().contains("column 'ofport'"), "{e}");
        assert!(Row::from_json(&json!([1])).is_err());
    }
}
