//! A real Kubernetes cluster for a test binary: `tests/kube/cluster.sh` (v1.20.2, real kubelets,
//! containerd, runc) in a network namespace of the binary's own, so its addresses exist only
//! there and two test binaries never share a cluster. See tests/kube/README.md.
//!
//! One cluster per test binary, started by the first test that asks ([`Cluster::shared`]) and
//! removed when the binary exits, whatever the tests did: starting one costs about 30 s.

use std::ffi::OsStr;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use super::workspace;

/// The name [`Cluster::factbuoy_image`] gives factbuoy's image.
pub const FACTBUOY_IMAGE: &str = "factbuoy.local/factbuoy:test";

/// A running cluster.
pub struct Cluster {
    name: String,
    dir: PathBuf,
}

static SHARED: OnceLock<Cluster> = OnceLock::new();

impl Cluster {
    /// The test binary's cluster with `nodes` nodes, started on first use; `name` tells it
    /// apart from other binaries' clusters (the network namespace is `factbuoy-t-<name>`).
    /// A cluster a killed run left under that name is removed first.
    pub fn shared(name: &str, nodes: u32) -> &'static Cluster {
        SHARED.get_or_init(|| {
            let cluster = Cluster {
                name: format!("factbuoy-t-{name}"),
                dir: PathBuf::from(format!("/run/factbuoy-t-{name}")),
            };
            cluster.script(["down"]);
            let up = cluster.script(["up", &nodes.to_string()]);
            assert!(
                up.status.success(),
                "cluster.sh up {nodes} failed:\n{}",
                String::from_utf8_lossy(&up.stderr)
            );
            // SAFETY: `remove_shared` is a plain extern "C" fn with no arguments; atexit runs
            // it after the test harness returns from main.
            unsafe { libc::atexit(remove_shared) };
            cluster
        })
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
    /// `factbuoy` (without its debug sections: about 130 MB), imported into every node; built on
    /// first use. Pods name it [`FACTBUOY_IMAGE`] with `imagePullPolicy: Never`.
    pub fn factbuoy_image(&self) -> &'static str {
        static IMPORTED: OnceLock<()> = OnceLock::new();
        IMPORTED.get_or_init(|| {
            let work = tempfile::tempdir().unwrap();
            let binary = work.path().join("factbuoy");
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
            let archive = work.path().join("factbuoy.tar");
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
            let imported = self.script([std::ffi::OsStr::new("import"), archive.as_os_str()]);
            assert!(
                imported.status.success(),
                "cluster.sh import: {}",
                String::from_utf8_lossy(&imported.stderr)
            );
        });
        FACTBUOY_IMAGE
    }

    /// A busybox image (busybox-static and its applets, `/bin/sh` its entrypoint) packed by
    /// tests/kube/mkimage.sh and imported into every node; built on first use. Pods name it
    /// with `imagePullPolicy: Never`.
    pub fn busybox_image(&self) -> &'static str {
        const IMAGE: &str = "factbuoy.local/test-busybox:1";
        static IMPORTED: OnceLock<()> = OnceLock::new();
        IMPORTED.get_or_init(|| {
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
            let archive = work.path().join("busybox.tar");
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
            let imported = self.script([std::ffi::OsStr::new("import"), archive.as_os_str()]);
            assert!(
                imported.status.success(),
                "cluster.sh import: {}",
                String::from_utf8_lossy(&imported.stderr)
            );
        });
        IMAGE
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

extern "C" fn remove_shared() {
    if let Some(cluster) = SHARED.get() {
        let down = cluster.script(["down"]);
        if !down.status.success() {
            eprintln!(
                "cluster.sh down failed:\n{}",
                String::from_utf8_lossy(&down.stderr)
            );
        }
    }
}
