//! The shared OpenFlow table ([`rqvs_ofproto::OfprotoTable`]) under the datapath's designs.

/// Two PMDs over one table: a rule committed once reaches both after `table_changed`, and
/// both answer as the reference does.
#[test]
fn pmds_share_one_table() {
    use crate::testutil::{expect, keys, rules};
    use crate::{Ccache, DatapathConfig, Orig, OrigConfig};
    use rqvs_ofproto::table::RuleChange;
    use rqvs_ofproto::OfprotoTable;
    let all = rules(300);
    let t = OfprotoTable::build(&all[..200]).unwrap();
    let cfg = DatapathConfig {
        clock: crate::Clock::Virtual { packet_ns: 100, upcall_ns: 1000 },
        ..DatapathConfig::default()
    };
    let mut a = Orig::with_table(t.clone(), cfg, OrigConfig::default());
    let mut b = Ccache::with_table(t.clone(), cfg, OrigConfig::default(), crate::ccache::CcacheConfig::default());
    let ks = keys(3000, 1);
    assert_eq!(a.run_keys(&ks), expect(&all[..200], &ks));
    assert_eq!(b.run_keys(&ks), expect(&all[..200], &ks));
    t.commit(all[200..].iter().cloned().map(RuleChange::Add).collect()).unwrap();
    a.table_changed();
    b.table_changed();
    assert_eq!(a.run_keys(&ks), expect(&all, &ks));
    assert_eq!(b.run_keys(&ks), expect(&all, &ks));
    assert!(a.table().is_same(b.table()), "one table, not copies");
}
