//! Transaction operations (RFC 7047 §5.2) and their results.

use serde_json::{json, Value};

use crate::datum::{short, Datum, Row, Uuid};
use crate::error::{protocol, Error, Result};

/// A condition `[column, function, value]`: `==`, `!=`, `includes`, `excludes`, `<`, `<=`,
/// `>`, `>=`.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub column: String,
    pub function: &'static str,
    pub value: Datum,
}

impl Condition {
    pub fn new(column: &str, function: &'static str, value: Datum) -> Condition {
        Condition { column: column.to_string(), function, value }
    }

    pub fn eq(column: &str, value: Datum) -> Condition {
        Condition::new(column, "==", value)
    }

    /// The row with this UUID.
    pub fn uuid(u: &Uuid) -> Condition {
        Condition::eq("_uuid", Datum::uuid(u))
    }

    fn to_json(&self) -> Value {
        json!([self.column, self.function, self.value.to_json()])
    }
}

/// A mutation `[column, mutator, value]`: `insert`/`delete` on sets and maps, `+=` etc. on
/// integers.
#[derive(Clone, Debug, PartialEq)]
pub struct Mutation {
    pub column: String,
    pub mutator: &'static str,
    pub value: Datum,
}

impl Mutation {
    pub fn insert(column: &str, value: Datum) -> Mutation {
        Mutation { column: column.to_string(), mutator: "insert", value }
    }

    pub fn delete(column: &str, value: Datum) -> Mutation {
        Mutation { column: column.to_string(), mutator: "delete", value }
    }

    pub fn add(column: &str, by: i64) -> Mutation {
        Mutation { column: column.to_string(), mutator: "+=", value: Datum::one(by) }
    }

    fn to_json(&self) -> Value {
        json!([self.column, self.mutator, self.value.to_json()])
    }
}

/// One operation of a transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A new row; `uuid_name` lets later operations of the transaction refer to it
    /// (`Datum::named_uuid`).
    Insert {
        table: String,
        row: Row,
        uuid_name: Option<String>,
    },
    Update {
        table: String,
        conditions: Vec<Condition>,
        row: Row,
    },
    Mutate {
        table: String,
        conditions: Vec<Condition>,
        mutations: Vec<Mutation>,
    },
    Delete {
        table: String,
        conditions: Vec<Condition>,
    },
    Select {
        table: String,
        conditions: Vec<Condition>,
        columns: Option<Vec<String>>,
    },
    /// Waits (up to `timeout_ms`, 0: not at all) until the selected rows' `columns` equal
    /// (`until_equal`) or differ from `rows`; the transaction fails otherwise.
    Wait {
        table: String,
        conditions: Vec<Condition>,
        columns: Vec<String>,
        until_equal: bool,
        rows: Vec<Row>,
        timeout_ms: u64,
    },
    Comment(String),
}

impl Op {
    pub fn insert(table: &str, row: Row) -> Op {
        Op::Insert { table: table.to_string(), row, uuid_name: None }
    }

    pub fn insert_named(table: &str, row: Row, uuid_name: &str) -> Op {
        Op::Insert { table: table.to_string(), row, uuid_name: Some(uuid_name.to_string()) }
    }

    pub fn update(table: &str, conditions: Vec<Condition>, row: Row) -> Op {
        Op::Update { table: table.to_string(), conditions, row }
    }

    pub fn mutate(table: &str, conditions: Vec<Condition>, mutations: Vec<Mutation>) -> Op {
        Op::Mutate { table: table.to_string(), conditions, mutations }
    }

    pub fn delete(table: &str, conditions: Vec<Condition>) -> Op {
        Op::Delete { table: table.to_string(), conditions }
    }

    pub fn select(table: &str, conditions: Vec<Condition>) -> Op {
        Op::Select { table: table.to_string(), conditions, columns: None }
    }

    pub fn wait(
        table: &str,
        conditions: Vec<Condition>,
        columns: &[&str],
        until_equal: bool,
        rows: Vec<Row>,
        timeout_ms: u64,
    ) -> Op {
        Op::Wait {
            table: table.to_string(),
            conditions,
            columns: columns.iter().map(|c| c.to_string()).collect(),
            until_equal,
            rows,
            timeout_ms,
        }
    }

    pub fn to_json(&self) -> Value {
        let conds = |c: &[Condition]| Value::Array(c.iter().map(Condition::to_json).collect());
        match self {
            Op::Insert { table, row, uuid_name } => {
                let mut o = json!({"op": "insert", "table": table, "row": row.to_json()});
                if let Some(n) = uuid_name {
                    o["uuid-name"] = json!(n);
                }
                o
            }
            Op::Update { table, conditions, row } => {
                json!({"op": "update", "table": table, "where": conds(conditions), "row": row.to_json()})
            }
            Op::Mutate { table, conditions, mutations } => json!({
                "op": "mutate", "table": table, "where": conds(conditions),
                "mutations": mutations.iter().map(Mutation::to_json).collect::<Vec<_>>(),
            }),
            Op::Delete { table, conditions } => json!({"op": "delete", "table": table, "where": conds(conditions)}),
            Op::Select { table, conditions, columns } => {
                let mut o = json!({"op": "select", "table": table, "where": conds(conditions)});
                if let Some(c) = columns {
                    o["columns"] = json!(c);
                }
                o
            }
            Op::Wait { table, conditions, columns, until_equal, rows, timeout_ms } => json!({
                "op": "wait", "table": table, "where": conds(conditions), "columns": columns,
                "until": if *until_equal { "==" } else { "!=" },
                "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
                "timeout": timeout_ms,
            }),
            Op::Comment(c) => json!({"op": "comment", "comment": c}),
        }
    }
}

/// What one operation returned: the new row's UUID (insert), the rows touched (update, mutate,
/// delete), the rows (select).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpResult {
    pub uuid: Option<Uuid>,
    pub count: Option<u64>,
    pub rows: Vec<Row>,
}

/// The `params` of a `transact` request.
pub fn transact_params(database: &str, ops: &[Op]) -> Value {
    let mut p = vec![json!(database)];
    p.extend(ops.iter().map(Op::to_json));
    Value::Array(p)
}

/// Reads a `transact` reply's result: one object per operation, an error object in place of
/// the one that failed (and one more after them for a failed commit). The first error is
/// returned as `Error::Server`, naming the operation.
pub fn parse_results(ops: &[Op], result: &Value) -> Result<Vec<OpResult>> {
    let arr =
        result.as_array().ok_or_else(|| protocol(format!("transact: expected an array, found {}", short(result))))?;
    for (i, r) in arr.iter().enumerate() {
        if let Some(err) = r.get("error").filter(|e| !e.is_null()) {
            let what = match ops.get(i) {
                Some(op) => format!("operation {} ({})", i + 1, op.to_json()["op"].as_str().unwrap_or("?")),
                None => "commit".to_string(),
            };
            let details = r.get("details").and_then(Value::as_str).unwrap_or("");
            return Err(Error::Server {
                error: format!("{what}: {}", err.as_str().unwrap_or(&err.to_string())),
                details: details.to_string(),
            });
        }
    }
    if arr.len() < ops.len() {
        return Err(protocol(format!("transact: {} results for {} operations", arr.len(), ops.len())));
    }
    arr.iter()
        .take(ops.len())
        .map(|r| {
            let mut out = OpResult::default();
            if let Some(u) = r.get("uuid") {
                match crate::datum::Atom::from_json(u)? {
                    crate::datum::Atom::Uuid(u) => out.uuid = Some(u),
                    _ => return Err(protocol(format!("transact: expected a uuid, found {}", short(u)))),
                }
            }
            out.count = r.get("count").and_then(Value::as_u64);
            if let Some(rows) = r.get("rows") {
                let rows = rows.as_array().ok_or_else(|| protocol("transact: 'rows' is not an array"))?;
                out.rows = rows.iter().map(Row::from_json).collect::<Result<_>>()?;
            }
            Ok(out)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_encode_as_rfc_7047() {
        let u = Uuid::parse("00000000-0000-0000-0000-000000000001").unwrap();
        let ops = [
            Op::insert_named("Bridge", Row::new().with("name", Datum::one("br0")), "b"),
            Op::mutate("Open_vSwitch", vec![], vec![Mutation::insert("bridges", Datum::named_uuid("b"))]),
            Op::update("Interface", vec![Condition::uuid(&u)], Row::new().with("ofport", Datum::one(3i64))),
            Op::wait("Bridge", vec![], &["name"], true, vec![], 0),
        ];
        let p = transact_params("Open_vSwitch", &ops);
        assert_eq!(p[0], "Open_vSwitch");
        assert_eq!(p[1], json!({"op": "insert", "table": "Bridge", "row": {"name": "br0"}, "uuid-name": "b"}));
        assert_eq!(p[2]["mutations"], json!([["bridges", "insert", ["named-uuid", "b"]]]));
        assert_eq!(p[3]["where"], json!([["_uuid", "==", ["uuid", u.as_str()]]]));
        assert_eq!(p[4]["until"], "==");
    }

    #[test]
    fn results_and_errors() {
        let ops = [Op::insert("Bridge", Row::new()), Op::select("Bridge", vec![])];
        let ok = json!([{"uuid": ["uuid", "00000000-0000-0000-0000-000000000002"]}, {"rows": [{"name": "br0"}]}]);
        let r = parse_results(&ops, &ok).unwrap();
        assert_eq!(r[0].uuid.as_ref().unwrap().as_str(), "00000000-0000-0000-0000-000000000002");
        assert_eq!(r[1].rows[0].str("name"), Some("br0"));
        let failed = json!([{}, {"error": "constraint violation", "details": "bad"}]);
        let e = parse_results(&ops, &failed).unwrap_err();
        assert!(e.to_string().contains("operation 2 (select): constraint violation"), "{e}");
        let commit = json!([{}, {}, {"error": "referential integrity violation"}]);
        assert!(parse_results(&ops, &commit).unwrap_err().to_string().contains("commit"));
        assert!(parse_results(&ops, &json!({})).is_err());
        assert!(parse_results(&ops, &json!([{}])).is_err());
        assert!(parse_results(&ops, &json!([{"uuid": 5}, {}])).is_err());
    }
}
