//! Test fixture: a gatherer built against `factbuoy:plugin@0.2.0` as released (frozen in
//! `wit/since_v0.2.0/`), not through the SDK. It declares what 0.2.0 added, the kinds of its
//! artifacts with the keys of a facts document's list and of a table's rows, and writes both.

wit_bindgen::generate!({
    path: "../../../wit/since_v0.2.0",
    world: "gatherer",
});

use exports::factbuoy::plugin::plugin::Guest;
use factbuoy::plugin::output;
use factbuoy::plugin::types::{
    ArtifactKind, ArtifactSpec, GatherError, ListKeys, ParamValue, PluginInfo,
};

struct Contract;

impl Guest for Contract {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "contract-0-2-0".into(),
            version: "0.2.0".into(),
            description: "Built against factbuoy:plugin@0.2.0.".into(),
            parameters: Vec::new(),
            capabilities: Vec::new(),
            artifacts: vec![
                ArtifactSpec {
                    name: "facts.json".into(),
                    media_type: "application/json".into(),
                    description: "a facts document with a keyed list".into(),
                    kind: ArtifactKind::Facts(vec![ListKeys {
                        path: "things".into(),
                        keys: vec!["id".into()],
                    }]),
                },
                ArtifactSpec {
                    name: "rows.jsonl".into(),
                    media_type: "application/jsonl".into(),
                    description: "a table keyed by name".into(),
                    kind: ArtifactKind::Table(vec!["name".into()]),
                },
            ],
        }
    }

    fn gather(_params: Vec<(String, ParamValue)>) -> Result<(), GatherError> {
        let failed = |e: output::OutputError| GatherError::Failed(format!("{e:?}"));
        let write = |name: &str, media_type: &str, text: &str| {
            let artifact = output::create(name, media_type).map_err(failed)?;
            artifact.write(text.as_bytes()).map_err(failed)?;
            artifact.finish().map_err(failed)
        };
        write(
            "facts.json",
            "application/json",
            r#"{"things": [{"id": "a", "size": 1}, {"id": "b", "size": 2}]}"#,
        )?;
        write(
            "rows.jsonl",
            "application/jsonl",
            "{\"name\": \"x\", \"count\": 1}\n{\"name\": \"y\", \"count\": 2}\n",
        )
    }
}

export!(Contract);
