//! `budget-…` modes: a plugin that hands the host more than the budgets allow, through every
//! channel it has (artifact metadata, progress, logs, its own error, the text it prints), or
//! that must see a secret parameter without the host writing it down.

use std::io::Write;

use factbuoy_guest::__bindings::factbuoy::plugin::{logging, output as raw, progress};
use factbuoy_guest::prelude::*;

/// Just below the host's default per-call limit (1 MiB), so that each call is accepted on its
/// own and only the run's totals can stop it.
const NEAR_CALL_LIMIT: usize = 1_000_000;

/// Text a terminal would act on: clear the screen, ring the bell, set the window title, write
/// the clipboard (OSC 52), move the cursor back over the line, and flip the text's direction.
pub const TERMINAL_ATTACK: &str =
    "\u{1b}[2J\u{7}\u{1b}]0;owned\u{7}\u{1b}]52;c;aGFja2Vk\u{7}\rfake ok\u{202e}txt.exe";

pub fn gather(mode: &str, params: &Params) -> Result<(), GatherError> {
    let count = params.integer("count")?.max(0) as usize;
    match mode {
        // Many artifacts with a huge media type and nothing written, each finished at once.
        "budget-media-types" => {
            let media_type = "m".repeat(NEAR_CALL_LIMIT);
            for i in 0..count {
                let artifact = raw::create(&format!("meta/{i}.bin"), &media_type)
                    .map_err(|e| GatherError::Failed(output::message(&e)))?;
                drop(artifact);
            }
            Ok(())
        }
        // Many artifacts held open at once.
        "budget-open-artifacts" => {
            let mut open = Vec::new();
            for i in 0..count {
                let artifact = raw::create(&format!("open/{i}.bin"), "application/octet-stream")
                    .map_err(|e| GatherError::Failed(output::message(&e)))?;
                open.push(artifact);
            }
            Ok(())
        }
        // Big log records and progress warnings, each within the per-call limit.
        "budget-log-flood" => {
            let text = "w".repeat(64 * 1024);
            for i in 0..count {
                logging::log(logging::Level::Warn, &format!("{i} {text}"));
                progress::report(&progress::ProgressUpdate {
                    completed: i as u64,
                    total: count as u64,
                    message: text.clone(),
                    warnings: vec![text.clone()],
                    errors: vec![text.clone()],
                });
            }
            Ok(())
        }
        // Empty records: only their number can add up.
        "budget-empty-records" => {
            for _ in 0..count {
                logging::log(logging::Level::Error, "");
            }
            Ok(())
        }
        // Terminal control sequences through every channel that reaches the operator.
        "budget-terminal" => {
            logging::log(logging::Level::Error, TERMINAL_ATTACK);
            progress::report(&progress::ProgressUpdate {
                completed: 1,
                total: 2,
                message: TERMINAL_ATTACK.to_owned(),
                warnings: vec![TERMINAL_ATTACK.to_owned()],
                errors: vec![TERMINAL_ATTACK.to_owned()],
            });
            eprintln!("{TERMINAL_ATTACK}");
            let artifact = raw::create("terminal.txt", TERMINAL_ATTACK)
                .map_err(|e| GatherError::Failed(output::message(&e)))?;
            drop(artifact.write(TERMINAL_ATTACK.as_bytes()));
            Err(GatherError::Failed(TERMINAL_ATTACK.to_owned()))
        }
        // An error message as long as the plugin's memory allows.
        "budget-long-error" => Err(GatherError::Failed("e".repeat(count << 20))),
        // `count` MiB of JSON made of many small values, streamed: cheap for the plugin, costly
        // for a host that parses it into a tree.
        "budget-big-json" => {
            let mut out = output::create_buffered("big.json", "application/json")?;
            let row = "{\"k\":[1,2,3],\"v\":\"x\"},";
            let rows = (count << 20) / row.len();
            let write = |out: &mut std::io::BufWriter<output::Artifact>, bytes: &[u8]| {
                out.write_all(bytes).map_err(output::into_gather_error)
            };
            write(&mut out, b"[")?;
            for _ in 0..rows {
                write(&mut out, row.as_bytes())?;
            }
            write(&mut out, b"0]")?;
            let artifact = out
                .into_inner()
                .map_err(|e| output::into_gather_error(e.into_error()))?;
            artifact
                .finish()
                .map_err(|e| GatherError::Failed(output::message(&e)))
        }
        // Proves it received the secret `token` without writing it down: the artifact holds
        // it reversed. A secret is the plugin's to keep; it must not come back from the host.
        "budget-secret" => {
            let token = params.string("token")?;
            let reversed: String = token.chars().rev().collect();
            output::write_json(
                "probe.json",
                &serde_json::json!({ "token_reversed": reversed, "token_len": token.len() }),
            )
        }
        other => Err(GatherError::InvalidParameters(format!(
            "unknown mode `{other}`"
        ))),
    }
}
