//! `rqvs paper --quick`: every figure produced with 0 mismatches, the page states each claim
//! and each figure's commands, a second run resumes from the kept JSON, bad options are errors.

mod common;
use common::{rqvs, TempDir};

#[test]
fn the_quick_evaluation_writes_its_page_and_resumes() {
    let Some(data) = rqvs_testkit::data::classbench_dir() else { return };
    let dir = TempDir::new("paper");
    let out = dir.path().display().to_string();
    let data = data.display().to_string();
    let run = |extra: &[&str]| {
        let o = rqvs(&[&["paper", "--quick", "--data", &data, "--out", &out][..], extra].concat());
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{err}");
        err
    };
    let log = run(&[]);
    let page = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let ids = [
        "table2", "fig3", "fig5", "fig7", "fig7b", "fig8", "fig9", "fig10", "fig11", "fig12", "fig13", "fig19",
        "fig14", "fig15", "fig17", "coflows", "ovs",
    ];
    // The OVS fidelity table needs Open vSwitch: skipped with a message where it is absent.
    let ovs = rqvs_testkit::ovs::ofctl_available();
    if !ovs {
        assert!(
            page.contains("## Fidelity against real Open vSwitch 3.1\n\nSkipped on this machine: Open vSwitch is not installed here"),
            "{page}"
        );
        assert!(!dir.join("json/ovs.json").exists(), "a skipped figure is not kept");
    }
    let produced: Vec<&str> = ids.into_iter().filter(|&id| id != "ovs" || ovs).collect();
    for &id in &produced {
        let kept: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(format!("json/{id}.json"))).unwrap()).unwrap();
        assert_eq!(kept["mismatches"], 0, "{id}");
        // Verified samples are positions in the trace, so a run starved by a loaded machine reaches
        // fewer of them (fig13's three 1 s runs checked 768 in one CI run): some, not a number.
        assert!(kept["verified"].as_u64().unwrap() > 0, "{id}: {}", kept["verified"]);
        assert!(!kept["claims"].as_array().unwrap().is_empty() && !kept["rows"].as_array().unwrap().is_empty(), "{id}");
        let title = kept["title"].as_str().unwrap();
        assert!(page.contains(&format!("## {title}")), "{id}: its section");
        if !kept["panels"].as_array().unwrap().is_empty() {
            let svg = std::fs::read_to_string(dir.join(format!("{id}.svg"))).unwrap();
            assert!(svg.starts_with("<svg") && page.contains(&format!("({id}.svg)")), "{id}: its plot");
        }
    }
    assert!(
        page.contains("## Claims") && page.contains("paper 2.6×") && page.contains("## Not produced yet"),
        "{page}"
    );
    assert!(page.contains("rqvs replay --rules") && page.contains("0 mismatches"), "{page}");
    assert!(page.matches(".svg)").count() >= 12, "every figure but the tables has its plot");
    assert!(!log.contains("kept from"), "{log}");
    // A second run reads every figure back.
    let log = run(&[]);
    assert_eq!(log.matches("kept from").count(), produced.len(), "{log}");
    assert_eq!(std::fs::read_to_string(dir.join("README.md")).unwrap(), page, "the same page from the kept figures");
    // --only: one figure measured again.
    let log = run(&["--only", "fig11", "--fresh"]);
    assert!(log.contains("fig11: Fig. 11") && !log.contains("fig3"), "{log}");

    let o = rqvs(&["paper", "--quick", "--data", &data, "--out", &out, "--only", "fig99"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains(
        "--only: unknown figure 'fig99' (known: table2, fig3, fig5, fig7, fig7b, fig8, fig9, fig10, fig11, fig12, fig13, fig19, fig14, fig15, fig17, coflows, ovs)"
    ));
    let o = rqvs(&["paper", "--quick", "--data", "/nonexistent", "--out", &out]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent: no ClassBench data here"));
    let o = rqvs(&["paper", "--quick", "--full"]);
    assert_eq!(o.status.code(), Some(2), "--quick and --full are exclusive");
}
