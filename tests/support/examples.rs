//! Command examples as `--help`, the README and docs/ write them, read back into the argument
//! lists of their `factbuoy` invocations, so that tests can parse and run them.
//!
//! tests/all/examples/parse.rs reads them all (every example parses) and tests/all/examples.rs
//! runs those that can run here, checking their output where a page shows it.

/// A word of a command's synopsis (`fleet revoke NODE`, `delete RUN-ID`, `[--dry-run]`,
/// `...`): a line with one describes a command rather than being one.
pub fn is_placeholder(word: &str) -> bool {
    word == "..."
        || word.starts_with('[')
        || (word.len() > 1
            && word.chars().any(|c| c.is_ascii_uppercase())
            && word
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_' || c == '-'))
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
    /// What the page shows it printing ([`PageLine::shown`]), for a line of one invocation.
    pub shown: Option<String>,
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

/// A command of a Markdown page's code block, with what the page shows it printing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageLine {
    /// The number of its first line in the page.
    pub number: usize,
    /// The command, continuations joined, the prompt taken off.
    pub line: String,
    /// The lines after it up to the next prompt or the block's end, when the block prompts
    /// (`$ `) and there are any: what the command prints, as the page shows it.
    pub shown: Option<String>,
}

/// The commands of a Markdown page's code blocks of commands (fenced as `sh`, `bash`, `shell`,
/// `console` or `text`: not diagrams, nor code). In a block with `$ ` prompts the prompted lines
/// are commands and the lines after each are its output; in one without, every line is a
/// command. A line ending in `\` is joined with the next.
pub fn markdown_lines(page: &str) -> Vec<PageLine> {
    let mut found = Vec::new();
    // The open block: its lines with their numbers, whether it holds commands.
    let mut block: Option<(Vec<(usize, &str)>, bool)> = None;
    for (index, line) in page.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            match block.take() {
                Some((lines, true)) => found.extend(block_commands(&lines)),
                Some(_) => {}
                None => {
                    let commands =
                        matches!(info.trim(), "sh" | "bash" | "shell" | "console" | "text");
                    block = Some((Vec::new(), commands));
                }
            }
        } else if let Some((lines, _)) = &mut block {
            lines.push((index + 1, line));
        }
    }
    found
}

/// The commands of one block of numbered lines ([`markdown_lines`]).
fn block_commands(lines: &[(usize, &str)]) -> Vec<PageLine> {
    let prompted = lines.iter().any(|(_, l)| l.trim_start().starts_with("$ "));
    if !prompted {
        let texts: Vec<&str> = lines.iter().map(|(_, l)| *l).collect();
        let first = lines.first().map_or(0, |(n, _)| *n);
        return joined(&texts)
            .into_iter()
            .map(|line| PageLine {
                number: first,
                line,
                shown: None,
            })
            .collect();
    }
    let mut found: Vec<PageLine> = Vec::new();
    let mut rest = lines;
    while let Some(start) = rest
        .iter()
        .position(|(_, l)| l.trim_start().starts_with("$ "))
    {
        let command_start = &rest[start..];
        // The command runs on over lines ending in `\`.
        let length = command_start
            .iter()
            .position(|(_, l)| !l.trim_end().ends_with('\\'))
            .map_or(command_start.len(), |i| i + 1);
        let texts: Vec<&str> = command_start[..length].iter().map(|(_, l)| *l).collect();
        let after = &command_start[length..];
        let output_end = after
            .iter()
            .position(|(_, l)| l.trim_start().starts_with("$ "))
            .unwrap_or(after.len());
        let shown: Vec<&str> = after[..output_end].iter().map(|(_, l)| *l).collect();
        found.push(PageLine {
            number: command_start[0].0,
            line: joined(&texts).concat(),
            shown: (!shown.is_empty()).then(|| shown.join("\n") + "\n"),
        });
        rest = &after[output_end..];
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

/// The `factbuoy` invocations of a page's command; what the page shows it printing goes with
/// it when it is one invocation.
pub fn page_invocations(source: &str, page_line: &PageLine) -> Vec<Invocation> {
    let mut found = invocations(source, &page_line.line).unwrap_or_default();
    if let [one] = found.as_mut_slice() {
        one.shown.clone_from(&page_line.shown);
    }
    found
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
            shown: None,
        });
    }
    Some(found)
}
