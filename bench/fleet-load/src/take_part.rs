//! Taking part in a run as `agent serve` does once offered one (host/agent/src/fleet.rs
//! `take_part`), with a recorded real result instead of running the plugin: enroll with the
//! run's agent listener (a key made for the run, the offer's credential), fetch the plan, send
//! heartbeats, and deliver each planned plugin's recorded artifacts and manifest. So that the
//! run's aggregator does the work a run of working agents gives it: results arriving.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use factbuoy_bench_replay::Replay;
use factbuoy_protocol::fleet::RunOffer;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::{Client, Scope};

/// Takes part in the run `offer` names, on the fleet's host `host`: enrolls at once, then,
/// `after` later, delivers each planned plugin's recorded result; heartbeats meanwhile.
pub async fn take_part(
    host: &str,
    offer: RunOffer,
    replays: &BTreeMap<String, Replay>,
    after: Duration,
) -> anyhow::Result<()> {
    let address = format!("{host}:{}", offer.agent_port);
    let key = factbuoy_pki::KeyRequest::new("factbuoy agent")?;
    let enrolled = Client::anonymous(&address, &offer.ca)?
        .enroll(&key.csr_pem, &offer.credential)
        .await
        .context("enrolling with the run")?;
    let identity = Identity {
        ca_pem: offer.ca.clone(),
        cert_pem: enrolled.certificate,
        key_pem: key.key_pem,
    };
    let client = Client::new(&address, &identity)?;
    let node = enrolled.node;
    let scope = Scope::Node(node.clone());
    let plan = client.plan(&scope).await.context("fetching the plan")?;
    let heartbeats = {
        let (client, node) = (client.clone(), node.clone());
        let every = Duration::from_secs(plan.heartbeat_seconds.max(1));
        tokio::spawn(async move {
            loop {
                // A failed heartbeat is the next one's to make up for, as in the agent.
                let _ = client.heartbeat(&node).await;
                tokio::time::sleep(every).await;
            }
        })
    };
    tokio::time::sleep(after).await;
    let delivered = async {
        for planned in &plan.plugins {
            let replay = replays.get(&planned.name).with_context(|| {
                format!(
                    "the plan names plugin {:?}, which has no recorded result",
                    planned.name
                )
            })?;
            for (name, path, sha256) in &replay.files {
                client
                    .put_file(&scope, &planned.name, name, path, sha256)
                    .await
                    .with_context(|| format!("uploading {name} of {}", planned.name))?;
            }
            client
                .commit(&scope, &planned.name, &replay.manifest)
                .await
                .with_context(|| format!("committing {}", planned.name))?;
        }
        anyhow::Ok(())
    }
    .await;
    heartbeats.abort();
    delivered
}
