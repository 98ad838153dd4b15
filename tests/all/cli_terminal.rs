//! The real `factbuoy` binary on a terminal, as a person sees it: run under a pseudo-terminal
//! (util-linux `script`), its transcript replayed through a terminal emulator (vt100) to get
//! the final screen.

use crate::support;

use std::process::Command;

/// Screen size of the pseudo-terminal: wide enough that no line wraps.
const ROWS: u16 = 80;
const COLUMNS: u16 = 250;

/// What a terminal showed: the final screen and the raw bytes written to it.
struct Terminal {
    screen: String,
    transcript: Vec<u8>,
    code: Option<i32>,
}

/// Runs `factbuoy ARGS` on a pseudo-terminal with `state` as its state directory.
fn on_terminal(state: &std::path::Path, args: &[&str]) -> Terminal {
    on_terminal_of(state, args, COLUMNS)
}

/// [`on_terminal`] on a terminal `columns` wide.
fn on_terminal_of(state: &std::path::Path, args: &[&str], columns: u16) -> Terminal {
    let quote = |word: &str| format!("'{}'", word.replace('\'', "'\\''"));
    let command_line: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_factbuoy"))
        .chain(args.iter().copied())
        .map(quote)
        .collect();
    let shell = format!(
        "stty rows {ROWS} cols {columns}; exec {}",
        command_line.join(" ")
    );
    let output = Command::new("script")
        // -q: no banner; -e: the child's exit code; -f: flush as written; -c: the command.
        .args(["-qefc", &shell, "/dev/null"])
        .env("FACTBUOY_STATE_DIR", state)
        .env("FACTBUOY_CACHE_DIR", support::cache_dir())
        .env("TERM", "xterm-256color")
        .output()
        .expect("running script (util-linux)");
    let mut parser = vt100::Parser::new(ROWS, columns, 0);
    parser.process(&output.stdout);
    Terminal {
        screen: parser.screen().contents(),
        transcript: output.stdout,
        code: output.status.code(),
    }
}

/// Whether `text` holds the progress bar's count (`1/2 results`).
fn shows_the_bar(text: &str) -> bool {
    text.split("/2 results").count() > 1
}

/// `factbuoy run ARGS` on a terminal, with hello and the hostile plugin looping until
/// `plugin_timeout` (which keeps the progress bar on screen that long, then fails it).
fn looping_run_on_terminal(args: &[&str], plugin_timeout: &str) -> Terminal {
    let dir = tempfile::tempdir().unwrap();
    let hostile = support::fixture("hostile");
    let out = dir.path().join("out");
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[
        "--node",
        "this-host",
        "--plugin",
        "hello",
        "--plugin",
        hostile.to_str().unwrap(),
        "-p",
        "hostile:mode=loop",
        "--plugin-timeout",
        plugin_timeout,
        "--out",
        out.to_str().unwrap(),
    ]);
    on_terminal(&dir.path().join("state"), &all)
}

#[test]
fn a_run_on_a_terminal_ends_with_its_summary_and_no_stale_progress_bar() {
    // The looping plugin keeps the bar on screen for two seconds, then fails its deadline.
    let terminal = looping_run_on_terminal(&[], "2s");
    let screen = &terminal.screen;
    assert_eq!(terminal.code, Some(1), "{screen}");
    // The bar was drawn while the run went on...
    assert!(
        shows_the_bar(&String::from_utf8_lossy(&terminal.transcript)),
        "no progress bar was drawn: {screen}"
    );
    // ...and is gone from the final screen, which ends with the summary and the failure's reason.
    assert!(!shows_the_bar(screen), "a stale progress bar: {screen}");
    assert!(
        screen.trim_start().starts_with("run "),
        "something is above the summary: {screen}"
    );
    assert!(
        screen.contains("hostile on this-host: plugin \"hostile\" 0.1.0:")
            && screen.contains("deadline"),
        "{screen}"
    );
    assert!(screen.contains("bundle: "), "{screen}");
}

#[test]
fn errors_on_a_terminal_are_one_sentence_without_log_noise() {
    let dir = tempfile::tempdir().unwrap();
    let terminal = on_terminal(
        &dir.path().join("state"),
        &["run", "--plugin", "hello", "-p", "hello:nosuch=1"],
    );
    assert_eq!(terminal.code, Some(2), "{}", terminal.screen);
    let screen = terminal.screen.trim();
    assert!(
        screen.starts_with("error: plugin \"hello\": unknown parameter `nosuch`"),
        "{screen}"
    );
    // No log timestamps (2026-...T...Z) and no level banners in normal output.
    assert!(
        !screen.contains(" WARN ") && !screen.contains("Z  "),
        "{screen}"
    );
}

#[test]
fn log_lines_print_above_the_progress_bar_intact() {
    // -v logs while the bar is on screen: the agent starts after the bar is drawn.
    let terminal = looping_run_on_terminal(&["-v"], "1s");
    let screen = &terminal.screen;
    assert!(
        screen
            .lines()
            .any(|line| line.starts_with("info: agent starting run=")),
        "the log line is not whole on its own line: {screen}"
    );
    assert!(!shows_the_bar(screen), "a stale progress bar: {screen}");
}

#[test]
fn json_is_pretty_on_a_terminal_and_one_line_when_piped() {
    let dir = tempfile::tempdir().unwrap();
    let terminal = on_terminal(&dir.path().join("state"), &["plugin", "list", "-o", "json"]);
    assert_eq!(terminal.code, Some(0), "{}", terminal.screen);
    // The screen holds only its last rows; the transcript has it all (a pty writes \r\n).
    let written = String::from_utf8_lossy(&terminal.transcript);
    assert!(written.starts_with("[\r\n  {\r\n    \"name\""), "{written}");

    let piped = support::factbuoy()
        .args(["plugin", "list", "-o", "json"])
        .output()
        .unwrap();
    let text = String::from_utf8(piped.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let _: serde_json::Value = serde_json::from_str(&text).unwrap();
}

#[test]
fn inspect_tables_fit_the_terminal_and_are_whole_when_piped() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = dir.path().join("out");
    let run = support::factbuoy()
        .env("FACTBUOY_STATE_DIR", &state)
        .args([
            "run",
            "--plugin",
            "host-facts",
            "--node",
            "this-host",
            "-o",
            "json",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let run: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let bundle = run["bundle"]["path"].as_str().unwrap();
    let args = ["inspect", "facts", bundle, "this-host"];
    // host-facts holds values far wider than 80 columns (the kernel's command line, flags).
    let piped = support::factbuoy().args(args).output().unwrap();
    let piped = String::from_utf8(piped.stdout).unwrap();
    let widest = piped.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(
        widest > 80,
        "nothing wider than the terminal to fit: {widest}"
    );

    let terminal = on_terminal_of(&state, &args, 80);
    assert_eq!(terminal.code, Some(0), "{}", terminal.screen);
    let written = String::from_utf8_lossy(&terminal.transcript);
    let lines: Vec<&str> = written.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), piped.lines().count());
    for line in &lines {
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    assert!(lines.iter().any(|l| l.ends_with('…')), "no cell was cut");
}

/// `plugin run` prints a JSON artifact indented on a terminal (for people), and exactly as the
/// plugin wrote it when piped (for programs).
#[test]
fn a_json_artifact_is_indented_on_a_terminal_and_as_written_when_piped() {
    let dir = tempfile::tempdir().unwrap();
    let terminal = on_terminal(&dir.path().join("state"), &["plugin", "run", "hello"]);
    assert_eq!(terminal.code, Some(0), "{}", terminal.screen);
    let written = String::from_utf8_lossy(&terminal.transcript);
    assert!(
        written.contains("{\r\n  \"greeting\": \"hello\",\r\n  \"hostname\""),
        "{written}"
    );

    let piped = support::factbuoy()
        .args(["plugin", "run", "hello"])
        .output()
        .unwrap();
    let text = String::from_utf8(piped.stdout).unwrap();
    assert!(
        text.starts_with("{\"greeting\":\"hello\",\"hostname\""),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1, "{text}");
}
