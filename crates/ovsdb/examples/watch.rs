//! Prints the bridges, ports and interfaces of an `Open_vSwitch` database at every change.
//!
//! `cargo run -p rqvs-ovsdb --example watch -- unix:/run/openvswitch/db.sock` (Ctrl-C ends it).

use std::time::Duration;

use rqvs_ovsdb::{Client, ClientConfig, MonitorTable, Remote, Replica};

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_else(|| rqvs_ovsdb::DEFAULT_REMOTE.to_string());
    let remote = match Remote::parse(&arg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("watch: {e}");
            std::process::exit(2);
        }
    };
    let tables = ["Open_vSwitch", "Bridge", "Port", "Interface"].iter().map(|t| MonitorTable::all(t)).collect();
    let client = Client::start(ClientConfig::new(remote, "Open_vSwitch", tables));
    if let Err(e) = client.wait_connected(Duration::from_secs(10)) {
        eprintln!("watch: {e}");
        std::process::exit(1);
    }
    let mut seen = 0;
    loop {
        let now = client.wait_change(seen, Duration::from_secs(3600));
        if now != seen {
            seen = now;
            let status = client.status();
            println!("-- change {now} (connected: {}, session {})", status.connected, status.sessions);
            client.with_replica(print);
        }
    }
}

fn print(r: &Replica) {
    for (_, br) in r.rows("Bridge") {
        println!("bridge {} datapath_type={}", br.str("name").unwrap_or("?"), br.str("datapath_type").unwrap_or(""));
        for p in br.uuids("ports") {
            let Some(port) = r.row("Port", &p) else { continue };
            for i in port.uuids("interfaces") {
                let Some(iface) = r.row("Interface", &i) else { continue };
                println!(
                    "  port {} interface {} type={} ofport={:?}",
                    port.str("name").unwrap_or("?"),
                    iface.str("name").unwrap_or("?"),
                    iface.str("type").unwrap_or(""),
                    iface.int("ofport")
                );
            }
        }
    }
}
