//! The client against a real `ovsdb-server` (OVS 3.1) on a fresh database made by `ovsdb-tool
//! create` from OVS's schema, changed by real `ovs-vsctl`. Skips without Open vSwitch, unless
//! `RQVS_REQUIRE_OVS=1` (set by `.ci/run`).

use std::time::Duration;

use rqvs_ovsdb::*;
use rqvs_testkit::ovsdb_server::{start_or_skip, OvsdbServer, VSWITCH_SCHEMA};

const T: Duration = Duration::from_secs(10);

fn tables() -> Vec<MonitorTable> {
    ["Open_vSwitch", "Bridge", "Port", "Interface"].iter().map(|t| MonitorTable::all(t)).collect()
}

fn client(server: &OvsdbServer) -> Client {
    let mut c = ClientConfig::new(Remote::parse(&server.remote()).unwrap(), "Open_vSwitch", tables());
    c.min_version = Some(Version(8, 0, 0));
    c.min_backoff = Duration::from_millis(50);
    c.max_backoff = Duration::from_millis(400);
    Client::start(c)
}

fn names(r: &Replica, table: &str) -> Vec<String> {
    let mut v: Vec<String> = r.rows(table).filter_map(|(_, row)| row.str("name").map(str::to_string)).collect();
    v.sort();
    v
}

#[test]
fn connection_calls() {
    let Some(server) = start_or_skip("calls") else { return };
    let mut c = Connection::open(&Remote::parse(&server.remote()).unwrap(), T).unwrap();
    assert!(c.list_dbs().unwrap().contains(&"Open_vSwitch".to_string()));
    let schema = c.get_schema("Open_vSwitch").unwrap();
    let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(VSWITCH_SCHEMA).unwrap()).unwrap();
    assert_eq!(schema.version.to_string(), file["version"].as_str().unwrap());
    assert!(schema.tables["Interface"].contains_key("ofport_request"));
    c.echo().unwrap();
    let e = c.get_schema("Nope").unwrap_err();
    assert!(matches!(e, Error::Server { .. }), "{e}");
    assert!(e.to_string().contains("unknown database"), "{e}");
}

#[test]
fn monitor_sees_vsctl_add_br_add_port_del_port() {
    let Some(server) = start_or_skip("monitor") else { return };
    server.vsctl(&["--no-wait", "init"]).unwrap();
    let c = client(&server);
    c.wait_connected(T).unwrap();
    assert!(c.wait_until(T, |r| r.len("Open_vSwitch") == 1));
    server.vsctl(&["--no-wait", "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]).unwrap();
    assert!(c.wait_until(T, |r| names(r, "Bridge") == ["br0"] && names(r, "Interface") == ["br0"]));
    server
        .vsctl(&[
            "--no-wait",
            "add-port",
            "br0",
            "p1",
            "--",
            "set",
            "interface",
            "p1",
            "ofport_request=5",
            "type=internal",
        ])
        .unwrap();
    assert!(c.wait_until(T, |r| names(r, "Port") == ["br0", "p1"]));
    c.with_replica(|r| {
        let (_, br) = r.find("Bridge", "name", "br0").unwrap();
        assert_eq!(br.str("datapath_type"), Some("netdev"));
        assert_eq!(br.uuids("ports").len(), 2);
        let (_, p1) = r.find("Interface", "name", "p1").unwrap();
        assert_eq!(p1.int("ofport_request"), Some(5));
        assert_eq!(p1.str("type"), Some("internal"));
        // The Open_vSwitch row refers to the bridge by UUID.
        let (_, ovs) = r.rows("Open_vSwitch").next().unwrap();
        assert_eq!(ovs.uuids("bridges"), vec![r.find("Bridge", "name", "br0").unwrap().0.clone()]);
    });
    server.vsctl(&["--no-wait", "del-port", "br0", "p1"]).unwrap();
    assert!(c.wait_until(T, |r| names(r, "Port") == ["br0"] && names(r, "Interface") == ["br0"]));
    server.vsctl(&["--no-wait", "del-br", "br0"]).unwrap();
    assert!(c.wait_until(T, |r| r.len("Bridge") == 0 && r.len("Port") == 0 && r.len("Interface") == 0));
    assert_eq!(c.status().sessions, 1);
}

#[test]
fn transactions_are_seen_by_vsctl() {
    let Some(server) = start_or_skip("transact") else { return };
    server.vsctl(&["--no-wait", "init"]).unwrap();
    let c = client(&server);
    c.wait_connected(T).unwrap();
    let ovs_uuid = c.with_replica(|r| r.rows("Open_vSwitch").next().map(|(u, _)| u.clone())).unwrap();
    // A bridge, its port and interface, made the way ovs-vsctl makes them: named UUIDs.
    let ops = [
        Op::insert_named(
            "Interface",
            Row::new().with("name", Datum::one("p9")).with("type", Datum::one("internal")),
            "i",
        ),
        Op::insert_named(
            "Port",
            Row::new().with("name", Datum::one("p9")).with("interfaces", Datum::named_uuid("i")),
            "p",
        ),
        Op::insert_named(
            "Bridge",
            Row::new()
                .with("name", Datum::one("br9"))
                .with("ports", Datum::named_uuid("p"))
                .with("other_config", Datum::map([("datapath-id", "0000000000000009")])),
            "b",
        ),
        Op::mutate(
            "Open_vSwitch",
            vec![Condition::uuid(&ovs_uuid)],
            vec![Mutation::insert("bridges", Datum::named_uuid("b"))],
        ),
        Op::Comment("rqvs-ovsdb test".into()),
    ];
    let res = c.transact(&ops).unwrap();
    let iface = res[0].uuid.clone().expect("the insert's uuid");
    assert_eq!(res[3].count, Some(1));
    assert_eq!(server.vsctl(&["list-br"]).unwrap().trim(), "br9");
    assert_eq!(server.vsctl(&["list-ports", "br9"]).unwrap().trim(), "p9");
    assert_eq!(
        server.vsctl(&["get", "bridge", "br9", "other_config:datapath-id"]).unwrap().trim(),
        "\"0000000000000009\""
    );
    // What ovs-vswitchd writes back: ofport, statistics, link state.
    let stats = Datum::map([("rx_packets", 12i64), ("tx_packets", 34i64)]);
    let res = c
        .transact(&[
            Op::wait(
                "Interface",
                vec![Condition::uuid(&iface)],
                &["name"],
                true,
                vec![Row::new().with("name", Datum::one("p9"))],
                0,
            ),
            Op::update(
                "Interface",
                vec![Condition::uuid(&iface)],
                Row::new()
                    .with("ofport", Datum::one(7i64))
                    .with("statistics", stats)
                    .with("link_state", Datum::one("up")),
            ),
            Op::select("Interface", vec![Condition::eq("name", Datum::one("p9"))]),
        ])
        .unwrap();
    assert_eq!(res[1].count, Some(1));
    assert_eq!(res[2].rows[0].int("ofport"), Some(7));
    let listed = server.vsctl(&["list", "interface", "p9"]).unwrap();
    assert!(listed.lines().any(|l| l.starts_with("ofport") && l.trim_end().ends_with(": 7")), "{listed}");
    assert!(listed.contains("rx_packets=12") && listed.contains("tx_packets=34"), "{listed}");
    assert!(listed.lines().any(|l| l.starts_with("link_state") && l.trim_end().ends_with(": up")), "{listed}");
    // The monitor saw the client's own writes too.
    assert!(c.wait_until(T, |r| r.row("Interface", &iface).and_then(|row| row.int("ofport")) == Some(7)));
    // A failing wait aborts the transaction and nothing of it is applied.
    let e = c
        .transact(&[
            Op::update("Interface", vec![Condition::uuid(&iface)], Row::new().with("ofport", Datum::one(8i64))),
            Op::wait(
                "Interface",
                vec![Condition::uuid(&iface)],
                &["name"],
                true,
                vec![Row::new().with("name", Datum::one("zz"))],
                0,
            ),
        ])
        .unwrap_err();
    assert!(matches!(e, Error::Server { .. }) && e.to_string().contains("operation 2 (wait)"), "{e}");
    assert_eq!(server.vsctl(&["get", "interface", "p9", "ofport"]).unwrap().trim(), "7");
    // A constraint the schema enforces: two bridges of one name.
    let dup = [
        Op::insert_named("Bridge", Row::new().with("name", Datum::one("br9")), "b2"),
        Op::mutate("Open_vSwitch", vec![], vec![Mutation::insert("bridges", Datum::named_uuid("b2"))]),
    ];
    let e = c.transact(&dup).unwrap_err();
    assert!(e.to_string().contains("constraint violation"), "{e}");
    assert_eq!(server.vsctl(&["list-br"]).unwrap().trim(), "br9");
}

#[test]
fn reconnects_after_a_restart_and_rereads_everything_once() {
    let Some(mut server) = start_or_skip("restart") else { return };
    server.vsctl(&["--no-wait", "init"]).unwrap();
    server
        .vsctl(&["--no-wait", "add-br", "br0", "--", "add-port", "br0", "p1", "--", "add-port", "br0", "p2"])
        .unwrap();
    let c = client(&server);
    c.wait_connected(T).unwrap();
    assert!(c.wait_until(T, |r| names(r, "Port") == ["br0", "p1", "p2"]));
    let br0 = c.with_replica(|r| r.find("Bridge", "name", "br0").unwrap().0.clone());
    let ovs = c.with_replica(|r| r.rows("Open_vSwitch").next().unwrap().0.clone());
    server.stop();
    assert!(c.wait_until(Duration::from_millis(1), |_| true) || !c.status().connected);
    let deadline = std::time::Instant::now() + T;
    while c.status().connected && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = c.status();
    assert!(!st.connected && st.last_error.is_some(), "{st:?}");
    assert!(matches!(c.transact(&[Op::Comment("x".into())]), Err(Error::Disconnected(_))));
    // While it is down the database changes behind the client's back: br0 goes (with its ports,
    // garbage-collected), brX comes.
    let offline = transact_params(
        "Open_vSwitch",
        &[
            Op::insert_named("Interface", Row::new().with("name", Datum::one("brX")), "i"),
            Op::insert_named(
                "Port",
                Row::new().with("name", Datum::one("brX")).with("interfaces", Datum::named_uuid("i")),
                "p",
            ),
            Op::insert_named(
                "Bridge",
                Row::new().with("name", Datum::one("brX")).with("ports", Datum::named_uuid("p")),
                "b",
            ),
            Op::mutate(
                "Open_vSwitch",
                vec![Condition::uuid(&ovs)],
                vec![
                    Mutation::insert("bridges", Datum::named_uuid("b")),
                    Mutation::delete("bridges", Datum::uuid(&br0)),
                ],
            ),
        ],
    );
    server.tool_transact(&offline.to_string()).unwrap();
    server.restart().unwrap();
    c.wait_connected(T).unwrap();
    assert!(c.wait_until(T, |r| names(r, "Bridge") == ["brX"]));
    c.with_replica(|r| {
        assert_eq!(names(r, "Port"), ["brX"], "nothing left over from the first session, nothing twice");
        assert_eq!(names(r, "Interface"), ["brX"]);
        assert_eq!(r.len("Open_vSwitch"), 1);
    });
    assert_eq!(c.status().sessions, 2);
    // And it works as before: vsctl's changes arrive, transactions go through.
    server.vsctl(&["--no-wait", "add-port", "brX", "p3"]).unwrap();
    assert!(c.wait_until(T, |r| names(r, "Port") == ["brX", "p3"]));
    c.transact(&[Op::update(
        "Interface",
        vec![Condition::eq("name", Datum::one("p3"))],
        Row::new().with("ofport", Datum::one(3i64)),
    )])
    .unwrap();
    assert_eq!(server.vsctl(&["get", "interface", "p3", "ofport"]).unwrap().trim(), "3");
}

#[test]
fn a_database_of_the_wrong_schema_is_refused() {
    if rqvs_testkit::ovsdb_server::start_or_skip("probe").is_none() {
        return;
    }
    let dir = rqvs_testkit::TempDir::new("ovsdb-schema");
    let mut schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(VSWITCH_SCHEMA).unwrap()).unwrap();
    schema["version"] = "7.16.0".into();
    schema.as_object_mut().unwrap().remove("cksum");
    let old = dir.join("old.ovsschema");
    std::fs::write(&old, schema.to_string()).unwrap();
    let server = OvsdbServer::start("old-schema", &old).unwrap();
    let c = client(&server);
    let e = c.wait_connected(T).unwrap_err();
    assert!(matches!(e, Error::Schema(_)), "{e}");
    assert!(e.to_string().contains("schema version 7.16.0, expected 8.x.y at least 8.0.0"), "{e}");
    // A database of another name.
    schema["name"] = "Other".into();
    schema["version"] = "8.3.1".into();
    let other = dir.join("other.ovsschema");
    std::fs::write(&other, schema.to_string()).unwrap();
    let server = OvsdbServer::start("other-db", &other).unwrap();
    let e = client(&server).wait_connected(T).unwrap_err();
    assert!(e.to_string().contains("has no database 'Open_vSwitch' (it has: Other, _Server)"), "{e}");
    // Tables missing.
    let schema = serde_json::json!({"name": "Open_vSwitch", "version": "8.3.1",
        "tables": {"Open_vSwitch": {"columns": {"next_cfg": {"type": "integer"}}, "isRoot": true}}});
    let no_port = dir.join("no-port.ovsschema");
    std::fs::write(&no_port, schema.to_string()).unwrap();
    let server = OvsdbServer::start("no-port", &no_port).unwrap();
    let e = client(&server).wait_connected(T).unwrap_err();
    assert!(e.to_string().contains("has no table 'Bridge'"), "{e}");
}
