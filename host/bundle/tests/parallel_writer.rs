//! The writer compresses on several threads; what it writes must stay one ordinary `.tar.gz`
//! that system tools and our reader read, with a true index and a true digest.
//! (factbuoy-inspect's `verify` checks any bundle against its own index; here the results tree
//! the bundle was written from is the truth to compare with.)

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use factbuoy_bundle::layout;
use factbuoy_bundle::reader::{Bundle, MAX_INDEX_BYTES};
use factbuoy_bundle::writer::{Meta, write};
use factbuoy_protocol::types::StatusDocument;
use sha2::{Digest, Sha256};

/// `bytes` of journal-like lines, different for each `seed`.
fn lines(seed: u64, bytes: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(bytes + 200);
    let mut n = 0u64;
    while out.len() < bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        n += 1;
        out.extend_from_slice(
            format!(
                "{{\"__CURSOR\":\"i={n:x};x={state:016x}\",\"MESSAGE\":\"unit-{}.service: request {} served\"}}\n",
                state % 40,
                state >> 40
            )
            .as_bytes(),
        );
    }
    out
}

fn stdout_of(command: &mut Command) -> String {
    let output = command.output().expect("the tool runs");
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn a_bundle_of_many_blocks_is_read_by_tar_gzip_and_our_reader_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let mut expected = vec!["meta/run.json".to_owned(), "meta/status.json".to_owned()];
    // Thirty 400 KB journals and an empty file: 12 MB, a dozen of the writer's 1 MiB blocks
    // compressed on separate threads, entries across their edges.
    for node in 0..30u64 {
        let path = format!("plugins/systemd-logs/results/node-{node:02}/journal.jsonl");
        std::fs::create_dir_all(tree.join(&path).parent().unwrap()).unwrap();
        std::fs::write(tree.join(&path), lines(node, 400_000)).unwrap();
        expected.push(path);
    }
    let empty = "plugins/systemd-logs/results/node-30/journal.jsonl".to_owned();
    std::fs::create_dir_all(tree.join(&empty).parent().unwrap()).unwrap();
    std::fs::write(tree.join(&empty), b"").unwrap();
    expected.push(empty);
    expected.push("meta/index.json".to_owned());

    let status: StatusDocument = serde_json::from_value(serde_json::json!({
        "run_id": "bench1", "status": "complete", "plugins": []
    }))
    .unwrap();
    let run = serde_json::json!({ "run_id": "bench1" });
    let meta = Meta {
        run_id: "bench1",
        run: &run,
        status: &status,
        definitions: Vec::new(),
    };
    let (path, info) = write(&meta, &tree, &dir.path().join("out")).unwrap();

    // The digest and size the run records are the file's.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(info.size, bytes.len() as u64);
    assert_eq!(info.sha256, hex::encode(Sha256::digest(&bytes)));

    stdout_of(Command::new("gzip").arg("-t").arg(&path));
    let listed: Vec<String> = stdout_of(Command::new("tar").arg("-tzf").arg(&path))
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(listed, expected);
    let node_7 = "plugins/systemd-logs/results/node-07/journal.jsonl";
    let extracted = Command::new("tar")
        .arg("-xzOf")
        .arg(&path)
        .arg(node_7)
        .output()
        .unwrap();
    assert!(extracted.status.success());
    assert!(extracted.stdout == lines(7, 400_000), "{node_7} differs");

    // Our reader reads every entry back; the index lists each with the size and sha-256 it
    // has, the results are the tree's files byte for byte, and the digest is the file's.
    let mut read: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut index: Vec<serde_json::Value> = Vec::new();
    let digest = Bundle::open(Path::new(&path))
        .unwrap()
        .walk_and_digest(|visited| {
            let entry = visited.expect("the writer writes no entry the reader refuses");
            if entry.path() == layout::INDEX {
                index = entry.read_json(MAX_INDEX_BYTES)?;
            } else {
                let (size, sha256) = entry.digest()?;
                read.insert(entry.path().to_owned(), (size, hex::encode(sha256)));
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(digest, Some((info.size, info.sha256.clone())));
    assert_eq!(read.len(), expected.len() - 1);
    for (entry, (size, sha256)) in &read {
        if entry.starts_with("plugins/") {
            let bytes = std::fs::read(tree.join(entry)).unwrap();
            assert_eq!(*size, bytes.len() as u64, "{entry}");
            assert_eq!(*sha256, hex::encode(Sha256::digest(&bytes)), "{entry}");
        }
    }
    let indexed: BTreeMap<String, (u64, String)> = index
        .iter()
        .map(|item| {
            let field = |name: &str| item[name].clone();
            (
                field("path").as_str().unwrap().to_owned(),
                (
                    field("size").as_u64().unwrap(),
                    field("sha256").as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect();
    assert_eq!(indexed, read);
}
