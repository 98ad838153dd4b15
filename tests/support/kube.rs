//! A real Kubernetes cluster for tests: `tests/kube/cluster.sh` (v1.20.2, real kubelets,
//! containerd, runc) in a network namespace named after it, so its addresses exist only there
//! and two clusters never meet. See tests/kube/README.md.
//!
//! A test binary has at most one cluster its tests share, started by the first test that asks
//! ([`Cluster::shared`]) and removed when the binary exits, whatever the tests did: starting one
//! costs about 30 s. A test that changes the nodes, or needs them to itself, starts a cluster of
//! its own instead ([`Cluster::start`]), removed when the test ends.

use std::ffi::OsStr;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use super::registry::TestRegistry;
use super::workspace;

/// The name [`Cluster::factbuoy_image`] gives factbuoy's image.
pub const FACTBUOY_IMAGE: &str = "factbuoy.local/factbuoy:test";

/// A running cluster; one a test started ([`Cluster::start`]) is removed when dropped.
pub struct Cluster {
    name: String,
    dir: PathBuf,
    /// Whether factbuoy's image, and busybox's, were imported into this cluster's nodes.
    factbuoy_imported: OnceLock<()>,
    busybox_imported: OnceLock<()>,
    /// The cluster's registry, once a test asked for it, and factbuoy's image pushed there.
    registry: OnceLock<TestRegistry>,
    registry_image: OnceLock<String>,
}

/// Where [`Cluster::registry`] listens: inside the cluster's network, on the API server's
/// address, which every node and pod reaches.
pub const REGISTRY_ADDRESS: &str = "10.200.0.1:5000";

static SHARED: OnceLock<Cluster> = OnceLock::new();

impl Cluster {
    /// A new cluster with `nodes` nodes, Ready when this returns, and removed when the value is
    /// dropped (a failing test's too). `name` tells it apart from every other cluster (the
    /// network namespace is `factbuoy-t-<name>`); a cluster a killed run left under that name
    /// is removed first.
    pub fn start(name: &str, nodes: u32) -> Cluster {
        let cluster = Cluster {
            name: format!("factbuoy-t-{name}"),
            dir: PathBuf::from(format!("/run/factbuoy-t-{name}")),
            factbuoy_imported: OnceLock::new(),
            busybox_imported: OnceLock::new(),
            registry: OnceLock::new(),
            registry_image: OnceLock::new(),
        };
        cluster.script(["down"]);
        let up = cluster.script(["up", &nodes.to_string()]);
        assert!(
            up.status.success(),
            "cluster.sh up {nodes} failed:\n{}",
            String::from_utf8_lossy(&up.stderr)
        );
        cluster
    }

    /// The cluster this test binary's tests share, with `nodes` nodes, started on first use
    /// ([`Cluster::start`]) and removed when the binary exits. Every test of a binary asks for
    /// it by the same `name`.
    pub fn shared(name: &str, nodes: u32) -> &'static Cluster {
        let cluster = SHARED.get_or_init(|| {
            let cluster = Cluster::start(name, nodes);
            // SAFETY: `remove_shared` is a plain extern "C" fn with no arguments; atexit runs
            // it after the test harness returns from main.
            unsafe { libc::atexit(remove_shared) };
            cluster
        });
        assert_eq!(
            cluster.name,
            format!("factbuoy-t-{name}"),
            "a test binary shares one cluster"
        );
        cluster
    }

    /// Runs `tests/kube/cluster.sh ARGS` against this cluster and returns what it printed.
    pub fn script<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&self, args: I) -> Output {
        Command::new(workspace().join("tests/kube/cluster.sh"))
            .args(args)
            .env("FACTBUOY_KUBE_NETNS", &self.name)
            .env("FACTBUOY_KUBE_DIR", &self.dir)
            .output()
            .expect("running tests/kube/cluster.sh")
    }

    /// `cluster.sh exec PROGRAM`: a command inside the cluster's network namespace, with
    /// `KUBECONFIG` set and kubectl on `PATH`. Add arguments and run it.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(workspace().join("tests/kube/cluster.sh"));
        command
            .env("FACTBUOY_KUBE_NETNS", &self.name)
            .env("FACTBUOY_KUBE_DIR", &self.dir)
            .arg("exec")
            .arg(program);
        command
    }

    /// `cluster.sh node-exec N PROGRAM`: a command on node `node` (1-based), inside its network,
    /// UTS, mount and PID namespaces, as a program started on that machine runs; it dies with
    /// the process that started it. Add arguments and run it.
    pub fn node_command(&self, node: u32, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(workspace().join("tests/kube/cluster.sh"));
        command
            .env("FACTBUOY_KUBE_NETNS", &self.name)
            .env("FACTBUOY_KUBE_DIR", &self.dir)
            .arg("node-exec")
            .arg(node.to_string())
            .arg(program);
        command
    }

    /// kubectl with `args`; panics with its stderr unless it succeeds, returns its stdout.
    pub fn kubectl<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&self, args: I) -> String {
        let output = self
            .command(self.kube_bin().join("kubectl"))
            .args(args)
            .output()
            .expect("running kubectl");
        assert!(
            output.status.success(),
            "kubectl failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("kubectl prints UTF-8")
    }

    /// factbuoy's own image, as deploy/build-image.sh builds it from this test binary's
    /// `factbuoy` ([`factbuoy_archive`]), imported into every node; imported once per cluster.
    /// Pods name it [`FACTBUOY_IMAGE`] with `imagePullPolicy: Never`: the pods that
    /// tests/kube_shared/manifests.rs builds from the manifests themselves, without a run's
    /// pull Secret. Runs take [`Cluster::factbuoy_image_in_registry`].
    pub fn factbuoy_image(&self) -> &'static str {
        self.factbuoy_imported
            .get_or_init(|| self.import(factbuoy_archive()));
        FACTBUOY_IMAGE
    }

    /// A real registry inside the cluster's network ([`REGISTRY_ADDRESS`]: TLS from a CA of
    /// its own, a password), started on first use and trusted by every node's containerd
    /// through a hosts.toml in the directory tests/kube/cluster.sh points containerd at. Pods
    /// pull from it with the credentials of a pull Secret, as from any private registry.
    pub fn registry(&self) -> &TestRegistry {
        self.registry.get_or_init(|| {
            let registry = TestRegistry::start_in(
                tempfile::tempdir_in(&self.dir).unwrap(),
                Some(&self.name),
                REGISTRY_ADDRESS.parse().unwrap(),
            );
            let hosts = self.dir.join("registry-hosts").join(REGISTRY_ADDRESS);
            std::fs::create_dir_all(&hosts).unwrap();
            std::fs::write(
                hosts.join("hosts.toml"),
                format!(
                    "server = \"https://{REGISTRY_ADDRESS}\"\n\
                     [host.\"https://{REGISTRY_ADDRESS}\"]\n  \
                     capabilities = [\"pull\", \"resolve\"]\n  ca = \"{}\"\n",
                    registry.cert_dir().join("ca.crt").display()
                ),
            )
            .unwrap();
            registry
        })
    }

    /// factbuoy's image ([`factbuoy_archive`]) pushed to [`Cluster::registry`] with skopeo,
    /// named by digest (`10.200.0.1:5000/factbuoy@sha256:...`): nodes pull it, nothing imports
    /// it.
    pub fn factbuoy_image_in_registry(&self) -> &str {
        self.registry_image.get_or_init(|| {
            let registry = self.registry();
            let digest_file = registry.scratch().join("image-digest");
            let copied = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.name,
                    "skopeo",
                    "copy",
                    "--dest-cert-dir",
                ])
                .arg(registry.cert_dir())
                .arg("--digestfile")
                .arg(&digest_file)
                .arg(format!("oci-archive:{}", factbuoy_archive().display()))
                .arg(format!("docker://{REGISTRY_ADDRESS}/factbuoy:test"))
                .env("REGISTRY_AUTH_FILE", registry.auth_file())
                .output()
                .unwrap();
            assert!(
                copied.status.success(),
                "skopeo copy of the image: {}",
                String::from_utf8_lossy(&copied.stderr)
            );
            let digest = std::fs::read_to_string(&digest_file).unwrap();
            format!("{REGISTRY_ADDRESS}/factbuoy@{}", digest.trim())
        })
    }

    /// A busybox image (busybox-static and its applets, `/bin/sh` its entrypoint) packed by
    /// tests/kube/mkimage.sh and imported into every node; built on first use, once per test
    /// binary, and imported once per cluster. Pods name it with `imagePullPolicy: Never`.
    pub fn busybox_image(&self) -> &'static str {
        const IMAGE: &str = "factbuoy.local/test-busybox:1";
        static ARCHIVE: OnceLock<PathBuf> = OnceLock::new();
        let archive = ARCHIVE.get_or_init(|| {
            let work = tempfile::tempdir().unwrap();
            let root = work.path().join("rootfs");
            for dir in ["bin", "etc", "tmp", "proc", "sys", "dev", "var/run"] {
                std::fs::create_dir_all(root.join(dir)).unwrap();
            }
            std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
            let applets = Command::new("/bin/busybox").arg("--list").output().unwrap();
            for applet in String::from_utf8(applets.stdout).unwrap().lines() {
                if applet != "busybox" {
                    std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
                }
            }
            std::fs::write(
                root.join("etc/passwd"),
                "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
            )
            .unwrap();
            std::fs::write(root.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n").unwrap();
            let archive = image_dir().join("busybox.tar");
            let packed = Command::new(workspace().join("tests/kube/mkimage.sh"))
                .arg(&root)
                .arg(IMAGE)
                .arg(&archive)
                .arg("/bin/sh")
                .output()
                .unwrap();
            assert!(
                packed.status.success(),
                "mkimage.sh: {}",
                String::from_utf8_lossy(&packed.stderr)
            );
            archive
        });
        self.busybox_imported.get_or_init(|| self.import(archive));
        IMAGE
    }

    /// `cluster.sh import ARCHIVE`: an OCI image archive into every node.
    fn import(&self, archive: &Path) {
        let imported = self.script([OsStr::new("import"), archive.as_os_str()]);
        assert!(
            imported.status.success(),
            "cluster.sh import: {}",
            String::from_utf8_lossy(&imported.stderr)
        );
    }

    /// The admin kubeconfig (context `factbuoy-kube`).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The Kubernetes binaries (kubectl and the rest), from tests/kube/build.sh's cache.
    pub fn kube_bin(&self) -> PathBuf {
        let cache = std::env::var_os("FACTBUOY_KUBE_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/cache/factbuoy/kube-v1.20.2"));
        cache.join("bin")
    }

    /// The cluster's network namespace (under /run/netns): the network its machines share.
    pub fn netns(&self) -> &str {
        &self.name
    }

    /// The cluster's state directory (logs in `logs/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `future` to completion on a Tokio runtime whose threads are inside the cluster's
    /// network namespace, where the API server's address exists. A thread joins the namespace
    /// before it builds the runtime, and the runtime's threads inherit it.
    pub fn block_on<F, Fut>(&self, future: F) -> Fut::Output
    where
        F: FnOnce() -> Fut + Send,
        Fut: Future,
        Fut::Output: Send,
    {
        let netns = PathBuf::from("/run/netns").join(&self.name);
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    let file = std::fs::File::open(&netns)
                        .unwrap_or_else(|e| panic!("opening {}: {e}", netns.display()));
                    rustix::thread::move_into_link_name_space(
                        std::os::fd::AsFd::as_fd(&file),
                        Some(rustix::thread::LinkNameSpaceType::Network),
                    )
                    .expect("joining the cluster's network namespace");
                    tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                        .expect("building a Tokio runtime")
                        .block_on(future())
                })
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }
}

/// factbuoy's image archive, as deploy/build-image.sh builds it from this test binary's
/// `factbuoy` (without its debug sections: about 130 MB); built on first use, once per test
/// binary.
pub fn factbuoy_archive() -> &'static Path {
    static ARCHIVE: OnceLock<PathBuf> = OnceLock::new();
    ARCHIVE.get_or_init(|| {
        let work = image_dir();
        let binary = work.join("factbuoy");
        let stripped = Command::new("objcopy")
            .arg("--strip-debug")
            .arg(env!("CARGO_BIN_EXE_factbuoy"))
            .arg(&binary)
            .output()
            .unwrap();
        assert!(
            stripped.status.success(),
            "objcopy: {}",
            String::from_utf8_lossy(&stripped.stderr)
        );
        let archive = work.join("factbuoy.tar");
        let built = Command::new(workspace().join("deploy/build-image.sh"))
            .arg(&binary)
            .arg(FACTBUOY_IMAGE)
            .arg(&archive)
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "build-image.sh: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        std::fs::remove_file(&binary).unwrap();
        archive
    })
}

/// Where this test binary keeps the image archives it builds: in the target directory, emptied
/// at its first use in a run (as [`super::cache_dir`]), since a static is never dropped.
fn image_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| super::binary_dir("kube-images")).clone()
}

impl Drop for Cluster {
    /// Removes a cluster a test started (the shared one, a static, is removed at exit).
    fn drop(&mut self) {
        self.remove();
    }
}

impl Cluster {
    /// `cluster.sh down`, saying so when it fails; the registry, if one was started, first.
    fn remove(&self) {
        if let Some(registry) = self.registry.get() {
            registry.stop();
        }
        let down = self.script(["down"]);
        if !down.status.success() {
            eprintln!(
                "cluster.sh down failed:\n{}",
                String::from_utf8_lossy(&down.stderr)
            );
        }
    }
}

extern "C" fn remove_shared() {
    if let Some(cluster) = SHARED.get() {
        cluster.remove();
    }
}
