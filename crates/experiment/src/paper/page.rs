//! The Markdown page of a run ([`page`]): the claims first, then each figure's section.

use super::{Figure, Outcome, PaperConfig, NOT_YET};

/// The Markdown page of an outcome.
pub fn page(cfg: &PaperConfig, o: &Outcome) -> String {
    let mut s = String::new();
    s.push_str("# The NSDI'22 paper's evaluation, reproduced by rqvs\n\n");
    s.push_str(&format!(
        "Made by `rqvs paper --{}` on the shared ClassBench data: seeds {}, sizes {}. Each figure gives the \
         paper's claims, rqvs's numbers beside the paper's, whether each claim holds here, the commands that \
         make each measurement, and the packets checked against the reference classifier. Throughput is \
         packets per second of PMD time on one core (`rqvs replay`'s model), not a NIC's line rate. In the \
         commands, `$DATA` is the ClassBench directory given with `--data` (`rules/`, `traces/`).\n\n",
        cfg.mode.name(),
        cfg.mode.seeds().join(", "),
        cfg.mode.sizes().join(", ")
    ));
    let data = cfg.data.display().to_string();
    let ok: Vec<&Figure> = o.figures.iter().filter_map(|(_, f)| f.as_ref().ok()).collect();
    if let Some(f) = ok.first() {
        let mut commits: Vec<&str> = ok.iter().flat_map(|f| f.commits.iter().map(|c| c.0.as_str())).collect();
        commits.sort_unstable();
        commits.dedup();
        s.push_str(&format!(
            "CPU: {}; measured at commit {} (each figure's commits below); page made at commit {}.\n\n",
            f.cpu,
            if commits.is_empty() { "—".into() } else { commits.join(", ") },
            f.git_rev
        ));
    }
    s.push_str("## Claims\n\n");
    for f in &ok {
        for c in &f.claims {
            let mark = match c.holds {
                Some(true) => "holds",
                Some(false) => "**does not hold**",
                None => "—",
            };
            s.push_str(&format!("- {} ({}): {} — paper {}, rqvs {}\n", f.id, mark, c.what, c.paper, c.rqvs));
        }
    }
    s.push('\n');
    for (spec, f) in &o.figures {
        match f {
            Ok(f) => figure_md(&mut s, f, &data),
            Err(e) => s.push_str(&format!("## {}\n\nNot produced: {e}\n\n", spec.title)),
        }
    }
    s.push_str("## Not produced yet\n\n");
    for n in NOT_YET {
        s.push_str(&format!("- {n}\n"));
    }
    s
}

/// `f`'s section; the commands name the data directory `data` as `$DATA`, so that they read the
/// same whichever path a run was given and can be pasted after `DATA=…`.
fn figure_md(s: &mut String, f: &Figure, data: &str) {
    s.push_str(&format!("## {}\n\n", f.title));
    if let Some(why) = &f.skipped {
        s.push_str(&format!("Skipped on this machine: {why}.\n\n"));
        return;
    }
    for c in &f.claims {
        let mark = match c.holds {
            Some(true) => " ✓",
            Some(false) => " ✗",
            None => "",
        };
        s.push_str(&format!("- {}{mark}: paper {}, rqvs {}\n", c.what, c.paper, c.rqvs));
    }
    s.push('\n');
    if !f.panels.is_empty() {
        s.push_str(&format!("![{}]({}.svg)\n\n", f.title, f.id));
    }
    if !f.header.is_empty() {
        s.push_str(&format!("| {} |\n", f.header.join(" | ")));
        s.push_str(&format!("|{}\n", "---|".repeat(f.header.len())));
        for r in &f.rows {
            s.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        s.push('\n');
    }
    for n in &f.notes {
        s.push_str(&format!("{n}\n\n"));
    }
    if !f.not_run.is_empty() {
        s.push_str("Not run here, each with the reason:\n\n");
        for n in &f.not_run {
            s.push_str(&format!("- {}\n", with_data_var(n, data)));
        }
        s.push('\n');
    }
    let commits: Vec<String> = f.commits.iter().map(|(c, n)| format!("{c} ({n} cells)")).collect();
    s.push_str(&format!(
        "{} packets checked against the reference, {} mismatches; {:.0} s of measurement; measured at commit {}.\n\n",
        f.verified,
        f.mismatches,
        f.seconds,
        if commits.is_empty() { "—".into() } else { commits.join(", ") }
    ));
    s.push_str("<details><summary>Commands</summary>\n\n```sh\n");
    for c in &f.commands {
        s.push_str(&with_data_var(c, data));
        s.push('\n');
    }
    s.push_str("```\n\n</details>\n\n");
}

/// `command` with each path under `data` written as `$DATA/…`.
fn with_data_var(command: &str, data: &str) -> String {
    let data = data.trim_end_matches('/');
    if data.is_empty() {
        return command.to_string();
    }
    command.replace(&format!("{data}/"), "$DATA/")
}

#[cfg(test)]
mod tests {
    use super::with_data_var;

    #[test]
    fn commands_name_the_data_directory_as_a_variable() {
        let c = "rqvs compare --rules /d/cb/rules/acl1_1k.xz --trace /d/cb/traces/acl1_1k_trace.xz --emc-prob 0.2";
        assert_eq!(
            with_data_var(c, "/d/cb/"),
            "rqvs compare --rules $DATA/rules/acl1_1k.xz --trace $DATA/traces/acl1_1k_trace.xz --emc-prob 0.2"
        );
        assert_eq!(with_data_var(c, "/d/other"), c);
        assert_eq!(
            with_data_var("rqvs trace --rules ../cb/rules/x.xz", "../cb"),
            "rqvs trace --rules $DATA/rules/x.xz"
        );
    }
}
