//! Every command example that `--help`, the README and docs/ show parses as written: an
//! example naming a flag, a value or a subcommand that changed fails here, with where it is
//! written. Its parent module runs those that can run on this machine.

use std::path::Path;

use clap::Command;

use super::written;

/// The widest a line of help may be: clap wraps longer ones (`max_term_width`), and a wrapped
/// example no longer runs when pasted.
const HELP_WIDTH: usize = 100;

/// The examples of `command`'s help and of every command below it; its lines too wide to be
/// shown unwrapped go to `too_wide`.
fn help_examples(
    command: &Command,
    path: &str,
    out: &mut Vec<written::Invocation>,
    too_wide: &mut Vec<String>,
) {
    for help in [command.get_after_help(), command.get_after_long_help()]
        .into_iter()
        .flatten()
    {
        let help = help.to_string();
        too_wide.extend(
            help.lines()
                .filter(|line| line.chars().count() > HELP_WIDTH)
                .map(|line| format!("`{path} --help`: {line}")),
        );
        for line in written::help_lines(&help) {
            let source = format!("`{path} --help`");
            out.extend(written::invocations(&source, &line).unwrap_or_default());
        }
    }
    for sub in command.get_subcommands() {
        help_examples(sub, &format!("{path} {}", sub.get_name()), out, too_wide);
    }
}

/// The examples of every Markdown page of the repository.
fn page_examples(root: &Path, out: &mut Vec<written::Invocation>) {
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() {
                if !matches!(name.as_ref(), "target" | "node_modules" | ".git") {
                    dirs.push(path);
                }
            } else if name.ends_with(".md") {
                let page = std::fs::read_to_string(&path).unwrap();
                let relative = path.strip_prefix(root).unwrap().display().to_string();
                for line in written::markdown_lines(&page) {
                    let source = format!("{relative}:{}", line.number);
                    out.extend(written::page_invocations(&source, &line));
                }
            }
        }
    }
}

/// Every example of `--help` (of every command) and of the repository's Markdown pages, in
/// that order, and how many came from `--help`.
pub(super) fn written_examples() -> (Vec<written::Invocation>, usize) {
    let mut examples = Vec::new();
    let mut root = factbuoy::command();
    root.build();
    let mut too_wide = Vec::new();
    help_examples(&root, "factbuoy", &mut examples, &mut too_wide);
    assert!(
        too_wide.is_empty(),
        "help lines wider than {HELP_WIDTH} columns, which clap would wrap (split them with \\):\n{}",
        too_wide.join("\n")
    );
    let from_help = examples.len();
    page_examples(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        &mut examples,
    );
    (examples, from_help)
}

#[test]
fn every_command_example_in_help_the_readme_and_docs_parses() {
    let (examples, from_help) = written_examples();
    assert!(from_help > 50, "only {from_help} examples in --help");
    assert!(
        examples.len() > from_help + 50,
        "only {} examples in the pages",
        examples.len() - from_help
    );
    let failures: Vec<String> = examples
        .iter()
        .filter_map(|example| {
            let args = std::iter::once("factbuoy").chain(example.args.iter().map(String::as_str));
            match factbuoy::command().try_get_matches_from(args) {
                Ok(_) => None,
                Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => None,
                Err(e) if e.kind() == clap::error::ErrorKind::DisplayVersion => None,
                Err(e) => Some(format!(
                    "{}: {}\n  {}",
                    example.source,
                    example.line,
                    e.render().to_string().lines().next().unwrap_or_default()
                )),
            }
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
