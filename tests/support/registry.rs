//! A real OCI registry for tests: Debian's `docker-registry` (the CNCF distribution registry)
//! on loopback, serving TLS with a certificate of a CA made for it and asking for a password
//! from an htpasswd file written by Apache's `htpasswd`, as registries users run do. Clients get
//! what podman and skopeo users have: an auth file and a directory of CA certificates.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;

/// The registry's one user.
pub const USER: &str = "plugin-pusher";
/// Its password.
pub const PASSWORD: &str = "correct horse battery staple";

/// A running registry, stopped and its storage removed on drop.
pub struct TestRegistry {
    dir: tempfile::TempDir,
    child: std::sync::Mutex<Child>,
    /// `127.0.0.1:PORT`, as references name it.
    pub address: String,
}

impl TestRegistry {
    /// Starts a registry on a free loopback port and waits until it accepts connections.
    pub fn start() -> TestRegistry {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_in(
            tempfile::tempdir().unwrap(),
            None,
            SocketAddr::from(([127, 0, 0, 1], port)),
        )
    }

    /// Starts a registry with its files in `dir`, listening on `address` inside network
    /// namespace `netns` (`ip netns exec`) or here, and waits until it accepts connections.
    pub fn start_in(
        dir: tempfile::TempDir,
        netns: Option<&str>,
        address: SocketAddr,
    ) -> TestRegistry {
        let root = dir.path();
        let ip = address.ip();
        let ca =
            factbuoy_pki::RunCa::create_named("factbuoy test registry CA", factbuoy_pki::VALIDITY)
                .unwrap();
        let san = vec![ip.to_string(), "localhost".to_owned()];
        let server = ca.issue_server(&san).unwrap();
        server.save(root, "server").unwrap();
        std::fs::create_dir_all(root.join("certs")).unwrap();
        std::fs::write(root.join("certs/ca.crt"), ca.cert_pem()).unwrap();
        let htpasswd = Command::new("htpasswd")
            .args(["-B", "-b", "-n", USER, PASSWORD])
            .output()
            .expect("running htpasswd (apt-get install apache2-utils)");
        assert!(htpasswd.status.success(), "htpasswd failed");
        std::fs::write(root.join("htpasswd"), htpasswd.stdout).unwrap();

        let address = address.to_string();
        std::fs::write(
            root.join("config.yml"),
            format!(
                "version: 0.1\n\
                 log: {{level: warn}}\n\
                 storage: {{filesystem: {{rootdirectory: {storage}}}, delete: {{enabled: true}}}}\n\
                 http:\n  addr: {address}\n  tls: {{certificate: {cert}, key: {key}}}\n\
                 auth:\n  htpasswd: {{realm: factbuoy-tests, path: {htpasswd}}}\n",
                storage = root.join("storage").display(),
                cert = root.join("server.pem").display(),
                key = root.join("server.key").display(),
                htpasswd = root.join("htpasswd").display(),
            ),
        )
        .unwrap();
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
        std::fs::write(
            root.join("auth.json"),
            format!(r#"{{"auths":{{"{address}":{{"auth":"{auth}"}}}}}}"#),
        )
        .unwrap();
        let mut command = match netns {
            // `ip netns exec` execs the registry: killing the child kills it.
            Some(netns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", netns, "docker-registry"]);
                command
            }
            None => Command::new("docker-registry"),
        };
        let child = command
            .arg("serve")
            .arg(root.join("config.yml"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(root.join("registry.log")).unwrap())
            .spawn()
            .expect("running docker-registry (apt-get install docker-registry)");
        let registry = TestRegistry {
            dir,
            child: std::sync::Mutex::new(child),
            address,
        };
        registry.wait_until_serving(netns);
        registry
    }

    fn wait_until_serving(&self, netns: Option<&str>) {
        let started = Instant::now();
        let (host, port) = self.address.rsplit_once(':').unwrap();
        let accepts = || match netns {
            Some(netns) => Command::new("ip")
                .args(["netns", "exec", netns, "bash", "-c"])
                .arg(format!("exec 3<>/dev/tcp/{host}/{port}"))
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            None => TcpStream::connect(&self.address).is_ok(),
        };
        while !accepts() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the registry did not listen on {} within 20 s: {}",
                self.address,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `oci://ADDRESS/REPOSITORY_AND_TAG`.
    pub fn reference(&self, repository_and_tag: &str) -> String {
        format!("oci://{}/{repository_and_tag}", self.address)
    }

    /// The auth file holding the user's credentials (containers-auth.json(5)).
    pub fn auth_file(&self) -> PathBuf {
        self.dir.path().join("auth.json")
    }

    /// The directory holding the registry's CA certificate (`ca.crt`).
    pub fn cert_dir(&self) -> PathBuf {
        self.dir.path().join("certs")
    }

    /// factbuoy's flags for reaching this registry.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--authfile".to_owned(),
            self.auth_file().display().to_string(),
            "--cert-dir".to_owned(),
            self.cert_dir().display().to_string(),
        ]
    }

    /// `skopeo` with the user's credentials in its environment; `cert_flags` are the
    /// subcommand's own (`--cert-dir`, `--dest-cert-dir`, ...), each given [`Self::cert_dir`].
    pub fn skopeo(&self, subcommand: &str, cert_flags: &[&str]) -> Command {
        let mut command = Command::new("skopeo");
        command
            .env("REGISTRY_AUTH_FILE", self.auth_file())
            .arg(subcommand);
        for flag in cert_flags {
            command.arg(flag).arg(self.cert_dir());
        }
        command
    }

    /// Where the registry keeps the blob `digest` (`sha256:...`) on disk.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// The registry's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The test's scratch directory beside the registry's files.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the registry (a registry that is down); its storage stays until drop.
    pub fn stop(&self) {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}
