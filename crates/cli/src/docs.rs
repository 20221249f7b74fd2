//! `rqvs completions SHELL` and `rqvs man [COMMAND…]`: shell completion scripts and manual pages
//! generated from the command line's own definition (clap_complete, clap_mangen), so they can
//! not drift from `--help`. Both print on stdout through [`report::stdout`].
//!
//! ```sh
//! rqvs completions bash > ~/.local/share/bash-completion/completions/rqvs
//! rqvs man > ~/.local/share/man/man1/rqvs.1            # rqvs(1)
//! rqvs man gen rules > ~/.local/share/man/man1/rqvs-gen-rules.1
//! ```

use clap::CommandFactory;

use crate::{report, Failure};

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    pub shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// A command (and subcommand) to print the page of, e.g. `replay` or `gen rules`; none: rqvs(1).
    pub command: Vec<String>,
}

pub fn completions<C: CommandFactory>(a: &CompletionsArgs) -> Result<(), Failure> {
    let mut cmd = C::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "rqvs", &mut out);
    report::stdout(&out);
    Ok(())
}

pub fn man<C: CommandFactory>(a: &ManArgs) -> Result<(), Failure> {
    let mut cmd = C::command();
    cmd.build();
    let version = cmd.get_version().unwrap_or_default().to_string();
    let mut name = String::from("rqvs");
    for word in &a.command {
        let known: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
        cmd = cmd
            .find_subcommand(word)
            .cloned()
            .ok_or_else(|| Failure(format!("man: '{name}' has no command '{word}' (known: {})", known.join(", "))))?;
        name = format!("{name}-{word}");
    }
    // The page is named after the command path (rqvs-gen-rules), as git's and cargo's are.
    let cmd = cmd.name(name.clone()).bin_name(name.replace('-', " ")).version(version);
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out).map_err(|e| Failure(format!("man: {e}")))?;
    report::stdout(&out);
    Ok(())
}
