//! `factbuoy man`: the man pages, generated from the same definition as `--help`: factbuoy(1),
//! and one page per command, named as the top page's SEE ALSO names them (`factbuoy-inspect(1)`,
//! `factbuoy-inspect-summary(1)`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::output::{ExitStatus, Format, emit, emit_document, emit_with};

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The command whose page to print, e.g. `inspect` or `inspect summary` [default: factbuoy's].
    #[arg(value_name = "COMMAND", conflicts_with = "dir")]
    command: Vec<String>,
    /// Write every page into this directory (factbuoy.1, factbuoy-run.1, ...) and list them.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the page of the command `args` names in `cli` (the whole command line's definition),
/// or writes every page.
pub fn man(args: ManArgs, cli: clap::Command, format: Format) -> anyhow::Result<ExitStatus> {
    // Built as clap builds it for parsing: each subcommand then has its page name
    // (`factbuoy-inspect`) and its usage line (`factbuoy inspect ...`). `help` is not a command
    // with a page of its own.
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    if let Some(dir) = args.dir {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut written = Vec::new();
        write_all(&cli, &dir, &mut written)?;
        match format {
            Format::Table => written.iter().for_each(|p| emit(&p.display().to_string())),
            machine => emit_document(&serde_json::json!({ "pages": written }), machine),
        }
        return Ok(ExitStatus::Success);
    }
    let mut page = &cli;
    for (depth, name) in args.command.iter().enumerate() {
        page = page.find_subcommand(name).with_context(|| {
            let parent = std::iter::once("factbuoy")
                .chain(args.command[..depth].iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            let names: Vec<&str> = page.get_subcommands().map(|c| c.get_name()).collect();
            if names.is_empty() {
                format!("`{parent}` has no commands, so no page for `{name}`")
            } else {
                format!(
                    "`{parent}` has no command `{name}`; its pages: {}",
                    names.join(", ")
                )
            }
        })?;
    }
    let man = clap_mangen::Man::new(page.clone());
    emit_with(|out| man.render(out));
    Ok(ExitStatus::Success)
}

/// Writes the page of `command` and of every command below it into `dir`.
fn write_all(
    command: &clap::Command,
    dir: &std::path::Path,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let path = clap_mangen::Man::new(command.clone())
        .generate_to(dir)
        .with_context(|| format!("writing a man page into {}", dir.display()))?;
    written.push(path);
    for sub in command.get_subcommands().filter(|c| !c.is_hide_set()) {
        write_all(sub, dir, written)?;
    }
    Ok(())
}
