//! A child process run to its end and measured: exit code, output, wall time and peak RSS, for
//! the tests that assert memory promises.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A finished child process, measured.
pub struct Measured {
    /// The exit code (-1 when a signal ended it).
    pub code: i32,
    /// Its standard output, unless it was sent elsewhere.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
    /// Peak resident set size of the command and its descendants, in bytes.
    pub peak_rss: u64,
    /// Wall time.
    pub elapsed: Duration,
}

impl Measured {
    /// Standard error, as text.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// Standard output, as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("no JSON on stdout ({e}); stderr: {}", self.stderr()))
    }
}

/// Runs `command` to its end, reading its output as it comes, and measures it.
pub fn measure(command: &Command) -> Measured {
    measure_into(command, Stdio::piped())
}

/// As [`measure`], with stdout sent to `stdout`. The peak RSS comes from GNU time, which forks
/// the command from its own small image: a child spawned from this (large) test process
/// directly would report this process's high-water mark, which Linux carries across `exec`.
/// The figure covers the command's descendants too (the kernel folds a reaped child's peak
/// into its parent's), so a command run by a shell is measured whole.
pub fn measure_into(command: &Command, stdout: Stdio) -> Measured {
    let usage = tempfile::NamedTempFile::new().unwrap();
    let mut timed = Command::new("/usr/bin/time");
    timed
        .args(["-f", "%M", "-o"])
        .arg(usage.path())
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => timed.env(key, value),
            None => timed.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        timed.current_dir(dir);
    }
    let started = Instant::now();
    let mut child = timed
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the command under /usr/bin/time (apt-get install time)");
    let drain = |mut stream: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            stream.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let stdout = child.stdout.take().map(|out| drain(Box::new(out)));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let status = child.wait().unwrap();
    let elapsed = started.elapsed();
    // `Command exited with non-zero status N` first when it failed; the figure, in KiB, last.
    let report = std::fs::read_to_string(usage.path()).unwrap();
    let kib: u64 = report
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak RSS from time: {report:?}"));
    Measured {
        code: status.code().unwrap_or(-1),
        stdout: stdout.map_or_else(Vec::new, |t| t.join().unwrap()),
        stderr: stderr.join().unwrap(),
        peak_rss: kib * 1024,
        elapsed,
    }
}

/// The peak resident set size of a live process, in KiB (`VmHWM` of `/proc/<pid>/status`);
/// none once it has gone.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .ok()
}
