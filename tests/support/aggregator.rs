//! An aggregator served by the real binary in a child process, with curl and `openssl s_client`
//! as independent TLS clients. Used by `tests/all/aggregator*.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::factbuoy;

/// Runs `command` and asserts that it succeeded.
pub fn run(command: &mut Command) -> Output {
    let output = command.output().expect("running factbuoy");
    assert!(
        output.status.success(),
        "{:?} failed: {}",
        command,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Lower-case hex sha-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `sha-256=:<base64>:` for `bytes`.
pub fn content_digest(bytes: &[u8]) -> String {
    use base64::Engine as _;
    format!(
        "sha-256=:{}:",
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(bytes))
    )
}

/// A manifest committing `files` with `outcome` (`succeeded`, or `failed` with an error).
pub fn manifest(outcome: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
    serde_json::to_vec(&manifest_json(outcome, files)).unwrap()
}

/// [`manifest`] as a JSON value, for a test to add to.
pub fn manifest_json(outcome: &str, files: &[(&str, &[u8])]) -> serde_json::Value {
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|(name, bytes)| serde_json::json!({"name": name, "size": bytes.len(), "sha256": sha256(bytes)}))
        .collect();
    serde_json::json!({
        "outcome": outcome,
        "error": (outcome == "failed").then_some("it broke"),
        "files": files,
        "plugin_version": "0.1.0",
    })
}

/// A run directory with its aggregator serving in a child process whose log is kept.
pub struct Aggregator {
    /// Holds the run directory (`run/`) and the bundle's folder (`out/`).
    root: PathBuf,
    /// Owns `root` when the fixture made it.
    _scratch: Option<tempfile::TempDir>,
    /// Issued credentials and the serve log, off the run's disk (which a test may fill).
    keys: tempfile::TempDir,
    /// Shell commands run before `serve` replaces the shell (resource limits), if any.
    limits: Option<String>,
    child: Option<Child>,
    /// The agent listener, HOST:PORT.
    pub agent: String,
    /// The operator listener, HOST:PORT.
    pub operator: String,
}

/// `factbuoy aggregator create` for a run in `dir` expecting `nodes` to run `hello`.
pub fn create_command(dir: &Path, nodes: &[&str], extra: &[&str]) -> Command {
    let mut command = factbuoy();
    command
        .args(["aggregator", "create", "--plugin", "hello"])
        .arg("--run-dir")
        .arg(dir.join("run"))
        .arg("--out")
        .arg(dir.join("out"));
    for node in nodes {
        command.args(["--node", node]);
    }
    command.args(extra);
    command
}

impl Aggregator {
    /// Creates a run expecting `nodes` to run `hello`, with extra `aggregator create` flags, and
    /// serves it.
    pub fn create(nodes: &[&str], extra: &[&str]) -> Self {
        let scratch = tempfile::tempdir().unwrap();
        let mut aggregator = Self::create_in(scratch.path(), nodes, extra);
        aggregator._scratch = Some(scratch);
        aggregator
    }

    /// [`Aggregator::create`] with the run and the bundle in `root` (a small disk, say).
    pub fn create_in(root: &Path, nodes: &[&str], extra: &[&str]) -> Self {
        Self::create_limited(root, nodes, extra, None)
    }

    /// [`Aggregator::create_in`], serving after the shell commands `limits` (`ulimit -n 256`).
    pub fn create_limited(
        root: &Path,
        nodes: &[&str],
        extra: &[&str],
        limits: Option<&str>,
    ) -> Self {
        run(&mut create_command(root, nodes, extra));
        let mut aggregator = Aggregator {
            root: root.to_owned(),
            _scratch: None,
            keys: tempfile::tempdir().unwrap(),
            limits: limits.map(str::to_owned),
            child: None,
            agent: String::new(),
            operator: String::new(),
        };
        aggregator.serve();
        aggregator
    }

    /// Holds the run directory and the bundle's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The run directory.
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    /// Where the bundle is written.
    pub fn out_dir(&self) -> PathBuf {
        self.root.join("out")
    }

    /// The aggregator's log (its stderr) since it was last served.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.keys.path().join("serve.log")).unwrap_or_default()
    }

    /// The serving process's id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the aggregator is serving").id()
    }

    /// `factbuoy aggregator serve` for the run (again, after [`Aggregator::kill`]).
    pub fn serve(&mut self) {
        let mut command = match &self.limits {
            Some(limits) => {
                let mut command = Command::new("sh");
                command
                    .arg("-c")
                    .arg(format!(
                        "{limits}; exec \"$0\" aggregator serve --run-dir \"$1\""
                    ))
                    .arg(env!("CARGO_BIN_EXE_factbuoy"))
                    .arg(self.run_dir())
                    .env("FACTBUOY_CACHE_DIR", super::cache_dir());
                command
            }
            None => {
                let mut command = factbuoy();
                command
                    .args(["aggregator", "serve", "--run-dir"])
                    .arg(self.run_dir());
                command
            }
        };
        let log = std::fs::File::create(self.keys.path().join("serve.log")).unwrap();
        let mut child = command.stdout(Stdio::piped()).stderr(log).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addresses: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("no serve line ({e}): {line:?}; its log: {}", self.log()));
        self.agent = addresses["agent_address"].as_str().unwrap().to_owned();
        self.operator = addresses["operator_address"].as_str().unwrap().to_owned();
        self.child = Some(child);
    }

    /// Stops serving with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// `factbuoy aggregator issue --role ROLE` into a fresh directory, as it ended.
    pub fn try_issue(&self, role: &str) -> (Output, PathBuf) {
        let out = self.credentials_dir(role);
        let output = factbuoy()
            .args(["aggregator", "issue", "--role", role])
            .arg("--run-dir")
            .arg(self.run_dir())
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        (output, out)
    }

    /// Credentials for `role` (`agent:a`, `operator:x`, `global:y`), issued once and reused
    /// (a full disk may refuse a second issue).
    pub fn issue(&self, role: &str) -> PathBuf {
        let out = self.credentials_dir(role);
        if out.exists() {
            return out;
        }
        let (output, out) = self.try_issue(role);
        assert!(
            output.status.success(),
            "issuing {role}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        out
    }

    /// Where the credentials for `role` are issued.
    fn credentials_dir(&self, role: &str) -> PathBuf {
        self.keys
            .path()
            .join(format!("creds-{}", sha256(role.as_bytes())))
    }

    /// The run directory's own operator credentials.
    pub fn operator_credentials(&self) -> PathBuf {
        let out = self.keys.path().join("operator-creds");
        if out.exists() {
            return out;
        }
        std::fs::create_dir_all(&out).unwrap();
        let pki = self.run_dir().join("pki");
        std::fs::copy(pki.join("ca.pem"), out.join("ca.pem")).unwrap();
        std::fs::copy(pki.join("operator.pem"), out.join("client.pem")).unwrap();
        std::fs::copy(pki.join("operator.key"), out.join("client.key")).unwrap();
        out
    }

    /// Runs the real agent for `node` to its end.
    pub fn agent_run(&self, node: &str) -> Output {
        let credentials = self.issue(&format!("agent:{node}"));
        factbuoy()
            .args([
                "agent",
                "--aggregator",
                &self.agent,
                "--node",
                node,
                "--retry-for",
                "60s",
            ])
            .arg("--credentials")
            .arg(credentials)
            .output()
            .unwrap()
    }

    /// The status document, through the operator's real client.
    pub fn status(&self) -> serde_json::Value {
        let output = run(factbuoy()
            .args(["status", "-o", "json", "--run-dir"])
            .arg(self.run_dir()));
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// The status document as the operator listener serves it (`GET /status`), which must
    /// answer.
    pub fn served_status(&self) -> serde_json::Value {
        let answer = self.operator_get("/status", &[]);
        assert_eq!(answer.status, 200, "{}", answer.text());
        serde_json::from_slice(&answer.body).unwrap()
    }

    /// Waits up to `within` for [`Aggregator::status`] to say `status`.
    pub fn wait_for(&self, status: &str, within: Duration) -> serde_json::Value {
        poll_status(status, within, || self.status())
    }

    /// Waits up to `within` for [`Aggregator::served_status`] to say `status`.
    pub fn wait_for_served(&self, status: &str, within: Duration) -> serde_json::Value {
        poll_status(status, within, || self.served_status())
    }

    /// `PUT`s `bytes` with a correct digest to `path` on the agent listener.
    pub fn put(&self, credentials: &Path, path: &str, bytes: &[u8]) -> Answer {
        let url = format!("https://{}{path}", self.agent);
        curl(
            credentials,
            "PUT",
            &url,
            Some(bytes),
            &[format!("content-digest: {}", content_digest(bytes))],
        )
    }

    /// A request to the operator listener with the run's operator credentials.
    pub fn operator_get(&self, path: &str, headers: &[String]) -> Answer {
        let credentials = self.operator_credentials();
        let url = format!("https://{}{path}", self.operator);
        curl(&credentials, "GET", &url, None, headers)
    }

    /// An upload whose head and first `sent` bytes of `bytes` are on the wire, the rest held
    /// back until [`SlowUpload::finish`].
    pub fn start_upload(
        &self,
        credentials: &Path,
        path: &str,
        bytes: &[u8],
        sent: usize,
    ) -> SlowUpload {
        let mut child = s_client(&self.agent, credentials, &[]);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let head = format!(
            "PUT {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n\
             content-digest: {}\r\n\r\n",
            bytes.len(),
            content_digest(bytes)
        );
        stdin.write_all(head.as_bytes()).unwrap();
        stdin.write_all(&bytes[..sent]).unwrap();
        stdin.flush().unwrap();
        SlowUpload {
            child,
            stdin: Some(stdin),
            rest: bytes[sent..].to_vec(),
            reader: Some(reader),
        }
    }
}

/// Polls `status_of` every 100 ms until its document's status is `status`.
fn poll_status(
    status: &str,
    within: Duration,
    status_of: impl Fn() -> serde_json::Value,
) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let document = status_of();
        if document["status"] == status {
            return document;
        }
        assert!(
            Instant::now() < deadline,
            "the run never became {status}: {document}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Drop for Aggregator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A TLS connection to `address` through `openssl s_client` with `credentials` (a directory
/// with ca.pem, client.pem, client.key) and more `options`: the request is written to its
/// stdin, the answer read from its stdout. `-quiet` implies `-ign_eof`: the connection stays
/// open after stdin ends, until the server closes it (`-no_ign_eof` closes it).
pub fn s_client(address: &str, credentials: &Path, options: &[&str]) -> Child {
    Command::new("openssl")
        .args(["s_client", "-quiet", "-connect", address])
        .args(options)
        .arg("-CAfile")
        .arg(credentials.join("ca.pem"))
        .arg("-cert")
        .arg(credentials.join("client.pem"))
        .arg("-key")
        .arg(credentials.join("client.key"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// An upload held open by [`Aggregator::start_upload`].
pub struct SlowUpload {
    child: Child,
    stdin: Option<ChildStdin>,
    rest: Vec<u8>,
    reader: Option<std::thread::JoinHandle<String>>,
}

impl SlowUpload {
    /// Sends the rest of the body and returns the raw HTTP answer.
    pub fn finish(mut self) -> String {
        let mut stdin = self.stdin.take().unwrap();
        stdin.write_all(&self.rest).unwrap();
        stdin.flush().unwrap();
        let text = self.reader.take().unwrap().join().unwrap();
        drop(stdin);
        text
    }
}

impl Drop for SlowUpload {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer from curl: HTTP status, body and response headers. Status 0 means no HTTP
/// exchange happened; curl's `stderr` says why.
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body, as bytes.
    pub body: Vec<u8>,
    /// The response headers, lower-cased names.
    pub headers: String,
    /// What curl said on stderr.
    pub stderr: String,
}

impl Answer {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The value of response header `name` (lower case), if present.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim().eq_ignore_ascii_case(name)).then(|| value.trim().to_owned())
        })
    }
}

/// How long one curl request may take, in seconds: a hung aggregator fails the test instead
/// of holding it (the largest upload the tests make, 64 MiB, takes a few seconds).
const CURL_MAX_TIME: &str = "120";

/// curl with `credentials` (a directory with ca.pem, client.pem, client.key).
pub fn curl(
    credentials: &Path,
    method: &str,
    url: &str,
    body: Option<&[u8]>,
    headers: &[String],
) -> Answer {
    let ca = credentials.join("ca.pem");
    curl_as(&ca, Some(credentials), method, url, body, headers)
}

/// curl trusting the CA in `ca`, presenting the certificate in `client` (a directory with
/// client.pem and client.key), or none.
pub fn curl_as(
    ca: &Path,
    client: Option<&Path>,
    method: &str,
    url: &str,
    body: Option<&[u8]>,
    headers: &[String],
) -> Answer {
    let scratch = tempfile::tempdir().unwrap();
    let mut command = Command::new("curl");
    command
        .args([
            "-sS",
            "--path-as-is",
            "--max-time",
            CURL_MAX_TIME,
            "-X",
            method,
            "-o",
        ])
        .arg(scratch.path().join("body"))
        .arg("-D")
        .arg(scratch.path().join("headers"))
        .args(["-w", "%{http_code}"])
        .arg("--cacert")
        .arg(ca);
    if let Some(client) = client {
        command
            .arg("--cert")
            .arg(client.join("client.pem"))
            .arg("--key")
            .arg(client.join("client.key"));
    }
    for header in headers {
        command.args(["-H", header]);
    }
    if let Some(body) = body {
        std::fs::write(scratch.path().join("upload"), body).unwrap();
        command
            .arg("--data-binary")
            .arg(format!("@{}", scratch.path().join("upload").display()));
    }
    let output = command.arg(url).output().expect("running curl");
    Answer {
        status: String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap_or(0),
        body: std::fs::read(scratch.path().join("body")).unwrap_or_default(),
        headers: std::fs::read_to_string(scratch.path().join("headers")).unwrap_or_default(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
