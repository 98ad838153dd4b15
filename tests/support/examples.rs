//! Command examples as `--help`, the README and docs/ write them, read back into the argument
//! lists of their `factbuoy` invocations, so that tests can parse and run them.
//!
//! Shared by the CLI's own unit test (every example parses) and tests/all/examples.rs (the
//! examples that can run here, run).

/// A word of a command's synopsis (`fleet revoke NODE`, `[--dry-run]`, `...`): a line with
/// one describes a command rather than being one.
pub fn is_placeholder(word: &str) -> bool {
    word == "..."
        || word.starts_with('[')
        || (word.len() > 1 && word.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
}

/// One `factbuoy` invocation of an example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// Where it is written: `README.md:12`, `--help of inspect sql`.
    pub source: String,
    /// The line as written (continuations joined).
    pub line: String,
    /// Its arguments after `factbuoy`.
    pub args: Vec<String>,
}

/// The shell lines of a help text's `Examples:` section: its indented lines, a line ending in
/// `\` joined with the next.
pub fn help_lines(help: &str) -> Vec<String> {
    let Some((_, examples)) = help.split_once("Examples:\n") else {
        return Vec::new();
    };
    // Indented lines, blank ones between them; the section ends at a line that is neither.
    let section: Vec<&str> = examples
        .lines()
        .take_while(|line| line.is_empty() || line.starts_with("  "))
        .filter(|line| !line.is_empty())
        .collect();
    joined(&section)
}

/// The shell lines of a Markdown page's code blocks of commands (fenced as `sh`, `bash`,
/// `shell`, `console` or `text`: not diagrams, nor code), each with its block's first line
/// number; a `$ ` prompt is taken off, a line ending in `\` joined with the next.
pub fn markdown_lines(page: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    // The open block: its first line's number, its lines, whether it holds commands.
    let mut block: Option<(usize, Vec<&str>, bool)> = None;
    for (number, line) in page.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            match block.take() {
                Some((start, lines, true)) => {
                    found.extend(joined(&lines).into_iter().map(|l| (start, l)));
                }
                Some(_) => {}
                None => {
                    let commands =
                        matches!(info.trim(), "sh" | "bash" | "shell" | "console" | "text");
                    block = Some((number + 2, Vec::new(), commands));
                }
            }
        } else if let Some((_, lines, _)) = &mut block {
            lines.push(line);
        }
    }
    found
}

/// `lines` with each `\`-ended line joined to the next, the prompt `$ ` taken off.
fn joined(lines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in lines {
        let line = line.trim();
        let line = line.strip_prefix("$ ").unwrap_or(line);
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The `factbuoy` invocations of one shell line (`a | b`, `a && b`, `a; b`), with redirections
/// and comments left out, synopses ([`is_placeholder`]) passed over; `cargo run --release --`
/// counts as `factbuoy`. None when the line
/// does not split as a shell would (an unclosed quote): such a line is no example.
pub fn invocations(source: &str, line: &str) -> Option<Vec<Invocation>> {
    let words = shlex::split(line)?;
    let mut found = Vec::new();
    for command in words.split(|w| matches!(w.as_str(), "|" | "||" | "&&" | ";")) {
        let mut args = Vec::new();
        let mut words = command.iter();
        while let Some(word) = words.next() {
            match word.as_str() {
                ">" | ">>" | "2>" | "<" => {
                    words.next();
                }
                w if w.starts_with('>') || w.starts_with("2>") => {}
                _ => args.push(word.clone()),
            }
        }
        // Leading environment assignments (FACTBUOY_LOG=debug factbuoy ...) and sudo.
        let start = args
            .iter()
            .position(|w| (w.starts_with('-') || !w.contains('=')) && w != "sudo")
            .unwrap_or(args.len());
        let args = &args[start..];
        let rest = match args {
            [first, rest @ ..] if first == "factbuoy" => rest,
            [cargo, run, release, dashes, rest @ ..]
                if [cargo, run, release, dashes] == ["cargo", "run", "--release", "--"] =>
            {
                rest
            }
            _ => continue,
        };
        if rest.iter().any(|w| is_placeholder(w)) {
            continue;
        }
        found.push(Invocation {
            source: source.to_owned(),
            line: line.to_owned(),
            args: rest.to_vec(),
        });
    }
    Some(found)
}
