//! Plugins through a real OCI registry (tests/support/registry.rs: the CNCF distribution
//! registry with TLS and a password): `plugin push` and `pull`, `oci://` plugins in `plugin run`,
//! `plugin info` and a local run, interoperability with skopeo both ways, and everything a
//! registry must not get away with.

use std::path::Path;
use std::process::{Command, Output};

use crate::support;
use crate::support::kube_runs::Bundle;
use crate::support::registry::TestRegistry;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `factbuoy ARGS` with the registry's flags after them.
fn factbuoy(registry: &TestRegistry, args: &[&str]) -> Output {
    support::factbuoy()
        .args(args)
        .args(registry.flags())
        .output()
        .unwrap()
}

/// `factbuoy ARGS -o json`, which must succeed.
fn factbuoy_json(registry: &TestRegistry, args: &[&str]) -> serde_json::Value {
    let output = factbuoy(registry, &[args, &["-o", "json"]].concat());
    assert!(
        output.status.success(),
        "factbuoy {args:?}: {}",
        text(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Runs `command`, which must succeed, and returns its stdout.
fn succeed(mut command: Command) -> Vec<u8> {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}",
        text(&output.stderr)
    );
    output.stdout
}

/// The manifest (and with `config`, the config) of `reference` as skopeo reads it.
fn skopeo_raw(registry: &TestRegistry, reference: &str, config: bool) -> serde_json::Value {
    let mut command = registry.skopeo("inspect", &["--cert-dir"]);
    command.arg("--raw");
    if config {
        command.arg("--config");
    }
    command.arg(format!(
        "docker://{}",
        reference.trim_start_matches("oci://")
    ));
    serde_json::from_slice(&succeed(command)).unwrap()
}

/// Writes an OCI image layout holding one manifest (config and one layer of the media types
/// given) tagged `tag`, as a tool other than factbuoy would, and pushes it to `reference` with
/// skopeo. Returns the manifest's digest.
fn push_by_hand(
    registry: &TestRegistry,
    reference: &str,
    config: (&str, &[u8]),
    layer: (&str, &[u8]),
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let blobs = dir.path().join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let put = |bytes: &[u8]| {
        let hex = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes));
        std::fs::write(blobs.join(&hex), bytes).unwrap();
        format!("sha256:{hex}")
    };
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": config.0, "digest": put(config.1), "size": config.1.len()},
        "layers": [{"mediaType": layer.0, "digest": put(layer.1), "size": layer.1.len()}],
    });
    let manifest = serde_json::to_vec(&manifest).unwrap();
    let digest = put(&manifest);
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest, "size": manifest.len(),
            "annotations": {"org.opencontainers.image.ref.name": "by-hand"},
        }],
    });
    std::fs::write(dir.path().join("index.json"), index.to_string()).unwrap();
    std::fs::write(
        dir.path().join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    let mut copy = registry.skopeo("copy", &["--dest-cert-dir"]);
    copy.arg(format!("oci:{}:by-hand", dir.path().display()))
        .arg(format!(
            "docker://{}",
            reference.trim_start_matches("oci://")
        ));
    succeed(copy);
    digest
}

/// Puts a manifest by hand with curl, as a registry client that checks nothing would: the
/// distribution registry stores a manifest whose layer sizes are wrong. Returns its digest.
fn put_manifest_with_curl(registry: &TestRegistry, reference: &str, manifest: &[u8]) -> String {
    let path = reference.trim_start_matches("oci://");
    let (repository, tag) = path.split_once('/').unwrap().1.rsplit_once(':').unwrap();
    let body = registry.scratch().join("manifest.json");
    std::fs::write(&body, manifest).unwrap();
    let mut curl = Command::new("curl");
    curl.args(["-sf", "-X", "PUT", "--cacert"])
        .arg(registry.cert_dir().join("ca.crt"))
        .args([
            "-u",
            &format!(
                "{}:{}",
                support::registry::USER,
                support::registry::PASSWORD
            ),
        ])
        .args([
            "-H",
            "Content-Type: application/vnd.oci.image.manifest.v1+json",
        ])
        .arg("--data-binary")
        .arg(format!("@{}", body.display()))
        .arg(format!(
            "https://{}/v2/{repository}/manifests/{tag}",
            registry.address
        ));
    succeed(curl);
    format!(
        "sha256:{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(manifest))
    )
}

/// The hello plugin's component, as bundled in the binary (`plugin pull` of it after a push).
fn pushed_hello(registry: &TestRegistry, reference: &str) -> serde_json::Value {
    factbuoy_json(registry, &["plugin", "push", "hello", reference])
}

#[test]
fn a_pushed_plugin_is_a_wasm_oci_artifact_that_skopeo_reads_and_copies_and_factbuoy_runs() {
    let registry = TestRegistry::start();
    let reference = registry.reference("plugins/hello:1.0");
    let pushed = pushed_hello(&registry, &reference);
    let digest = pushed["digest"].as_str().unwrap();
    assert_eq!(pushed["reference"], format!("{reference}@{digest}"));
    let component = pushed["component_sha256"].as_str().unwrap();

    // The CNCF TAG Runtime layout, read by a client nobody here wrote.
    let manifest = skopeo_raw(&registry, &reference, false);
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    assert_eq!(layers[0]["digest"], format!("sha256:{component}"));
    let annotations = &manifest["annotations"];
    assert_eq!(annotations["org.opencontainers.image.title"], "hello");
    assert_eq!(annotations["org.opencontainers.image.version"], "0.1.0");
    let config = skopeo_raw(&registry, &reference, true);
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"][0], format!("sha256:{component}"));
    let exports = config["component"]["exports"].as_array().unwrap();
    assert!(
        exports
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("factbuoy:plugin/plugin@")),
        "{config}"
    );

    // skopeo copies it to another repository; factbuoy runs the copy.
    let copied = registry.reference("elsewhere/greeter:copied");
    let mut copy = registry.skopeo("copy", &["--src-cert-dir", "--dest-cert-dir"]);
    copy.arg(format!(
        "docker://{}",
        reference.trim_start_matches("oci://")
    ))
    .arg(format!("docker://{}", copied.trim_start_matches("oci://")));
    succeed(copy);
    let ran = factbuoy_json(
        &registry,
        &[
            "plugin",
            "run",
            &copied,
            "--grant",
            "hello:host-info",
            "-p",
            "greeting=hej",
        ],
    );
    assert_eq!(ran["succeeded"], true, "{ran}");
    let info = factbuoy_json(&registry, &["plugin", "info", &copied]);
    assert_eq!(info["name"], "hello");

    // Pulled back, it is the bundled component, byte for byte, and an OCI layout skopeo reads.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pulled.wasm");
    let pulled = factbuoy_json(
        &registry,
        &["plugin", "pull", &reference, "--out", out.to_str().unwrap()],
    );
    assert_eq!(pulled["reference"], pushed["reference"]);
    assert_eq!(
        support::aggregator::sha256(&std::fs::read(&out).unwrap()),
        component,
        "the pulled file is the pushed component"
    );
    let layout = dir.path().join("layout");
    factbuoy_json(
        &registry,
        &[
            "plugin",
            "pull",
            &reference,
            "--layout",
            layout.to_str().unwrap(),
        ],
    );
    let from_layout: serde_json::Value = serde_json::from_slice(&succeed({
        let mut inspect = Command::new("skopeo");
        inspect
            .args(["inspect", "--raw"])
            .arg(format!("oci:{}:1.0", layout.display()));
        inspect
    }))
    .unwrap();
    assert_eq!(from_layout, manifest);
}

#[test]
fn a_plugin_artifact_another_tool_wrote_runs() {
    let registry = TestRegistry::start();
    let wasm = std::fs::read(support::fixture("uptime")).unwrap();
    let reference = registry.reference("by-hand/uptime:v1");
    let config = br#"{"architecture":"wasm","os":"wasip2","layerDigests":[]}"#;
    let digest = push_by_hand(
        &registry,
        &reference,
        ("application/vnd.wasm.config.v0+json", config),
        ("application/wasm", &wasm),
    );
    let info = factbuoy_json(&registry, &["plugin", "info", &reference]);
    assert_eq!(info["name"], "uptime", "{info}");
    // By digest alone, as a run pins it.
    let pinned = registry.reference(&format!("by-hand/uptime@{digest}"));
    let ran = factbuoy_json(
        &registry,
        &["plugin", "run", &pinned, "--grant", "uptime:host-info"],
    );
    assert_eq!(ran["succeeded"], true, "{ran}");
}

#[test]
fn a_local_run_pulls_a_tag_once_and_its_bundle_says_which_digest_it_ran() {
    let registry = TestRegistry::start();
    let reference = registry.reference("plugins/hello:stable");
    let pushed = pushed_hello(&registry, &reference);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let ran = support::factbuoy()
        .env("FACTBUOY_STATE_DIR", dir.path().join("state"))
        .args(["run", "--node", "this-host", "--plugin", &reference])
        .args(["--grant", "hello:host-info", "--out"])
        .arg(&out)
        .args(registry.flags())
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let bundle = bundle_in(&out);
    let run = bundle.json("meta/run.json");
    let plugin = &run["plugins"][0];
    assert_eq!(plugin["name"], "hello");
    assert_eq!(plugin["source"], pushed["reference"], "{run}");
    assert_eq!(plugin["sha256"], pushed["component_sha256"]);
    assert!(
        bundle
            .files
            .contains_key("plugins/hello/results/this-host/greeting.json"),
        "{:?}",
        bundle.files.keys()
    );
}

fn bundle_in(out: &Path) -> Bundle {
    support::kube_runs::bundle_in(out).expect("a bundle in --out")
}

#[test]
fn a_tag_moved_after_it_was_resolved_changes_nothing_pinned_to_its_digest() {
    let registry = TestRegistry::start();
    let tag = registry.reference("plugins/moving:stable");
    let first = pushed_hello(&registry, &tag);
    let pinned = first["reference"].as_str().unwrap();
    // The tag moves to another plugin.
    let uptime = support::fixture("uptime");
    factbuoy_json(
        &registry,
        &["plugin", "push", uptime.to_str().unwrap(), &tag],
    );
    let now = factbuoy_json(&registry, &["plugin", "info", &tag]);
    assert_eq!(now["name"], "uptime", "the tag moved");
    // What was resolved before still names the first plugin: digest and tag together, the
    // digest wins.
    let then = factbuoy_json(&registry, &["plugin", "info", pinned]);
    assert_eq!(then["name"], "hello");
}

/// `plugin pull REFERENCE --out FILE`: the error, after checking that it failed and wrote
/// nothing.
fn refused_pull(reference: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plugin.wasm");
    let output = support::factbuoy()
        .args(["plugin", "pull", reference, "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    assert!(!output.status.success(), "pulled {reference}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "a refused pull wrote {leftovers:?}");
    text(&output.stderr)
}

#[test]
fn what_a_registry_must_not_get_away_with_is_refused_and_nothing_is_written() {
    let registry = TestRegistry::start();
    let flags = registry.flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let hello = pushed_hello(&registry, &registry.reference("plugins/hello:1"));
    let manifest = skopeo_raw(&registry, &registry.reference("plugins/hello:1"), false);

    // A layer whose size the manifest overstates (2 GB, over the 256 MiB limit): refused
    // before a byte of it is read; one it understates: refused when more arrives.
    for (size, tag, says) in [
        (
            2_147_483_648_u64,
            "huge",
            "is 2147483648 bytes, over the limit of 268435456",
        ),
        (
            1000,
            "short",
            "is longer than the 1000 bytes its manifest says",
        ),
    ] {
        let mut lying = manifest.clone();
        lying["layers"][0]["size"] = size.into();
        let reference = registry.reference(&format!("plugins/hello:{tag}"));
        put_manifest_with_curl(&registry, &reference, &serde_json::to_vec(&lying).unwrap());
        let error = refused_pull(&reference, &flags);
        assert!(error.contains(says), "{tag}: {error}");
    }

    // Not components: a core module, bytes that are not WebAssembly, a container image.
    // (tag, config, layer, what the refusal says); config and layer as (media type, bytes).
    type Blob<'a> = (&'a str, &'a [u8]);
    let not_plugins: [(&str, Blob, Blob, &str); 3] = [
        (
            "core",
            ("application/vnd.wasm.config.v0+json", b"{}"),
            ("application/wasm", b"\0asm\x01\0\0\0"),
            "is a core WebAssembly module, not a component",
        ),
        (
            "garbage",
            ("application/vnd.wasm.config.v0+json", b"{}"),
            ("application/wasm", b"#!/bin/sh\nrm -rf /\n"),
            "is not WebAssembly",
        ),
        (
            "image",
            (
                "application/vnd.oci.image.config.v1+json",
                br#"{"architecture":"amd64","os":"linux"}"#,
            ),
            ("application/vnd.oci.image.layer.v1.tar", &[0; 1024]),
            "it is not a plugin artifact",
        ),
    ];
    for (tag, config, layer, says) in not_plugins {
        let reference = registry.reference(&format!("not/plugin:{tag}"));
        push_by_hand(&registry, &reference, config, layer);
        let error = refused_pull(&reference, &flags);
        assert!(error.contains(says), "{tag}: {error}");
        let run = factbuoy(&registry, &["plugin", "run", &reference]);
        assert!(
            !run.status.success() && text(&run.stderr).contains(says),
            "{tag}: run"
        );
    }

    // A layer altered in the registry's storage: its digest no longer matches.
    let component = hello["component_sha256"].as_str().unwrap();
    let stored = registry.blob_file(&format!("sha256:{component}"));
    let mut bytes = std::fs::read(&stored).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&stored, bytes).unwrap();
    let error = refused_pull(&registry.reference("plugins/hello:1"), &flags);
    assert!(error.contains("digest"), "altered layer: {error}");

    // Wrong credentials, an untrusted certificate, a registry that is down: each says what to do.
    let reference = registry.reference("plugins/hello:1");
    let wrong = registry.scratch().join("wrong-auth.json");
    std::fs::write(
        &wrong,
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{}"}}}}}}"#,
            registry.address,
            base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                "plugin-pusher:wrong"
            )
        ),
    )
    .unwrap();
    let cert_dir = registry.cert_dir();
    let cert_dir = cert_dir.to_str().unwrap();
    let error = refused_pull(
        &reference,
        &[
            "--authfile",
            wrong.to_str().unwrap(),
            "--cert-dir",
            cert_dir,
        ],
    );
    assert!(error.contains("podman login"), "wrong password: {error}");
    let auth = registry.auth_file();
    let error = refused_pull(&reference, &["--authfile", auth.to_str().unwrap()]);
    assert!(
        error.contains("UnknownIssuer") && error.contains("--cert-dir"),
        "untrusted CA: {error}"
    );
    registry.stop();
    let error = refused_pull(&reference, &flags);
    assert!(
        error.contains("Connection refused"),
        "registry down: {error}"
    );
}

/// A registry that answers every manifest request with a manifest of `size` bytes (valid JSON,
/// padded in an annotation), over plain HTTP on loopback; its address. The distribution registry
/// stores no manifest over 4 MiB, so a registry that serves one is a server of the test's own.
fn registry_serving_a_manifest_of(size: usize) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let head = r#"{"schemaVersion":2,"annotations":{"pad":""#;
    let mut manifest = head.as_bytes().to_vec();
    manifest.resize(size - 3, b'x');
    manifest.extend_from_slice(br#""}}"#);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request_line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            // The rest of the request head.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let body: &[u8] = if request_line.contains("/manifests/") {
                &manifest
            } else {
                b"{}"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(body);
        }
    });
    address
}

#[test]
fn a_manifest_over_the_limit_is_refused_and_nothing_is_written() {
    let address = registry_serving_a_manifest_of((4 << 20) + 1);
    let reference = format!("oci://{address}/plugins/huge:1");
    let error = refused_pull(&reference, &["--tls-verify=false"]);
    assert!(
        error.contains("its manifest is 4194305 bytes, over the limit of 4194304"),
        "{error}"
    );
    let run = support::factbuoy()
        .args(["plugin", "run", &reference, "--tls-verify=false"])
        .output()
        .unwrap();
    assert!(
        !run.status.success() && text(&run.stderr).contains("over the limit"),
        "run: {}",
        text(&run.stderr)
    );
}

/// An ECDSA P-256 key pair made by openssl, as a user makes one: (private PEM, public PEM).
fn key_pair(dir: &Path, name: &str) -> (String, String) {
    let private = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub"));
    let mut genpkey = Command::new("openssl");
    genpkey
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&private);
    succeed(genpkey);
    let mut pubout = Command::new("openssl");
    pubout
        .args(["pkey", "-pubout", "-in"])
        .arg(&private)
        .arg("-out")
        .arg(&public);
    succeed(pubout);
    let text = |p: std::path::PathBuf| p.to_str().unwrap().to_owned();
    (text(private), text(public))
}

#[test]
fn a_signed_plugin_runs_where_its_key_is_required_and_an_unsigned_altered_or_elsewhere_signed_one_is_refused_before_it_runs()
 {
    let registry = TestRegistry::start();
    let keys = tempfile::tempdir().unwrap();
    let (ours, ours_pub) = key_pair(keys.path(), "ours");
    let (_, theirs_pub) = key_pair(keys.path(), "theirs");
    let signed = registry.reference("plugins/hello:1");
    pushed_hello(&registry, &signed);
    let signing = factbuoy_json(&registry, &["plugin", "sign", &signed, "--key", &ours]);
    let digest = signing["digest"].as_str().unwrap();
    assert_eq!(
        signing["signature_tag"],
        format!("{}.sig", digest.replace(':', "-"))
    );
    // cosign's layout, read by skopeo: one simple-signing payload with its signature.
    let signatures = skopeo_raw(
        &registry,
        &registry.reference(&format!(
            "plugins/hello:{}",
            signing["signature_tag"].as_str().unwrap()
        )),
        false,
    );
    let layer = &signatures["layers"][0];
    assert_eq!(
        layer["mediaType"],
        "application/vnd.dev.cosign.simplesigning.v1+json"
    );
    assert!(layer["annotations"]["dev.cosignproject.cosign/signature"].is_string());

    let require = |key: &str| ["--require-signature".to_owned(), key.to_owned()];
    let run = |plugin: &str, key: &str| {
        factbuoy(
            &registry,
            &[
                &[
                    "plugin",
                    "run",
                    plugin,
                    "--grant",
                    "hello:host-info",
                    "-o",
                    "json",
                ][..],
                &require(key).iter().map(String::as_str).collect::<Vec<_>>(),
            ]
            .concat(),
        )
    };
    let ran = run(&signed, &ours_pub);
    assert!(ran.status.success(), "{}", text(&ran.stderr));

    // Each refusal says why, on stderr and in -o json, and nothing ran.
    let refused = |output: Output, says: &str| {
        assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
        let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let error = document["error"].as_str().unwrap();
        assert!(error.contains("refused") && error.contains(says), "{error}");
        assert!(document.get("artifacts").is_none(), "it ran: {document}");
    };
    // Signed, but by another key than the one required.
    refused(run(&signed, &theirs_pub), "a signature by another key");
    // Unsigned.
    let unsigned = registry.reference("plugins/hello:unsigned");
    pushed_hello(&registry, &unsigned);
    let uptime = support::fixture("uptime");
    factbuoy_json(
        &registry,
        &["plugin", "push", uptime.to_str().unwrap(), &unsigned],
    );
    refused(run(&unsigned, &ours_pub), "it is not signed");
    // Altered: the signature of one manifest copied to another's signature tag.
    let other = factbuoy_json(&registry, &["plugin", "info", &unsigned]);
    assert_eq!(other["name"], "uptime");
    let unsigned_digest = skopeo_digest(&registry, &unsigned);
    let mut copy = registry.skopeo("copy", &["--src-cert-dir", "--dest-cert-dir"]);
    copy.arg(format!(
        "docker://{}/plugins/hello:{}",
        registry.address,
        signing["signature_tag"].as_str().unwrap()
    ))
    .arg(format!(
        "docker://{}/plugins/hello:{}.sig",
        registry.address,
        unsigned_digest.replace(':', "-")
    ));
    succeed(copy);
    refused(run(&unsigned, &ours_pub), "of another manifest");
    // A plugin from a file carries no signature.
    let file = factbuoy(
        &registry,
        &[
            "plugin",
            "run",
            uptime.to_str().unwrap(),
            "-o",
            "json",
            "--require-signature",
            &ours_pub,
        ],
    );
    refused(file, "a plugin from a file carries none");

    // A local run refuses before any node runs anything, and records the key of what it ran.
    let dir = tempfile::tempdir().unwrap();
    let local = |plugin: &str| {
        support::factbuoy()
            .env("FACTBUOY_STATE_DIR", dir.path().join("state"))
            .args(["run", "--node", "this-host", "--plugin", plugin])
            .args([
                "--grant",
                "hello:host-info",
                "--require-signature",
                &ours_pub,
                "--out",
            ])
            .arg(dir.path().join("out"))
            .args(registry.flags())
            .output()
            .unwrap()
    };
    let refused_run = local(&unsigned);
    assert_eq!(refused_run.status.code(), Some(2));
    assert!(
        text(&refused_run.stderr).contains("refused"),
        "{}",
        text(&refused_run.stderr)
    );
    assert!(
        !dir.path().join("out").exists(),
        "a refused run wrote a bundle"
    );
    let ran = local(&signed);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let plugin = &bundle_in(&dir.path().join("out")).json("meta/run.json")["plugins"][0];
    assert_eq!(plugin["signed_by"], signing["key"], "{plugin:#}");
}

/// The digest of the manifest `reference` names: the sha-256 of what skopeo reads raw (skopeo
/// 1.9 cannot inspect an artifact otherwise).
fn skopeo_digest(registry: &TestRegistry, reference: &str) -> String {
    let mut raw = registry.skopeo("inspect", &["--cert-dir"]);
    raw.arg("--raw").arg(format!(
        "docker://{}",
        reference.trim_start_matches("oci://")
    ));
    format!(
        "sha256:{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(succeed(raw)))
    )
}
