//! `reviews`: how many TokenReviews a second the API server answers, by how many are in flight.
//! The aggregator admits each agent with one TokenReview (its pod comes from the run's pod
//! watch); this is the rate its admission bound (`MAX_ADMISSIONS_IN_FLIGHT`) is chosen from.
//!
//! The tokens are as the agents' are: for a ServiceAccount, with an audience of their own, each
//! bound to a pod (a placeholder pod that never runs), so the API server checks the pod at each
//! review. Each token is reviewed once: the API server caches what it authenticated.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use factbuoy_dispatch::names;
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ServiceAccount};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::json;

const NAMESPACE: &str = "default";
const NAME: &str = "factbuoy-bench-reviews";

/// Reviews `tokens` fresh tokens at each of `in_flight`, and prints a JSON line per level:
/// reviews per second, and the p50 and p99 of one review's time.
pub(crate) async fn measure(
    client: kube::Client,
    tokens: usize,
    in_flight: &[usize],
) -> anyhow::Result<()> {
    let pod = placeholder(&client).await?;
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE);
    let reviews = Api::<TokenReview>::all(client);
    for &level in in_flight {
        let issued = futures_util::stream::iter(0..tokens)
            .map(|_| token(&accounts, &pod))
            .buffer_unordered(32)
            .try_collect::<Vec<String>>()
            .await?;
        let started = Instant::now();
        let mut times = futures_util::stream::iter(issued)
            .map(|token| review(&reviews, token))
            .buffer_unordered(level)
            .try_collect::<Vec<Duration>>()
            .await?;
        let seconds = started.elapsed().as_secs_f64();
        times.sort();
        let at = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize].as_secs_f64();
        println!(
            "{}",
            json!({
                "in_flight": level,
                "reviews": tokens,
                "per_second": tokens as f64 / seconds,
                "p50_ms": at(0.5) * 1000.0,
                "p99_ms": at(0.99) * 1000.0,
            })
        );
    }
    Ok(())
}

/// The ServiceAccount and the pod the tokens are for; the pod asks for a node that does not
/// exist, so it stays Pending.
async fn placeholder(client: &kube::Client) -> anyhow::Result<Pod> {
    let exists = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 409);
    let meta = || ObjectMeta {
        name: Some(NAME.to_owned()),
        ..Default::default()
    };
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE);
    let account = ServiceAccount {
        metadata: meta(),
        ..Default::default()
    };
    match accounts.create(&PostParams::default(), &account).await {
        Err(e) if !exists(&e) => return Err(e).context("creating the ServiceAccount"),
        _ => {}
    }
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let pod = Pod {
        metadata: meta(),
        spec: Some(PodSpec {
            service_account_name: Some(NAME.to_owned()),
            // Nothing to mount: the ServiceAccount admission then needs no token Secret yet.
            automount_service_account_token: Some(false),
            node_selector: Some([("factbuoy-bench/none".to_owned(), "none".to_owned())].into()),
            containers: vec![Container {
                name: "none".to_owned(),
                image: Some("none".to_owned()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    // The ServiceAccount admission knows the account from its cache, a moment after it exists.
    let started = Instant::now();
    loop {
        match pods.create(&PostParams::default(), &pod).await {
            Err(e) if !exists(&e) && started.elapsed() < Duration::from_secs(30) => {
                eprintln!("kube-load: creating the placeholder pod: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) if !exists(&e) => return Err(e).context("creating the placeholder pod"),
            _ => break,
        }
    }
    pods.get(NAME).await.context("reading the placeholder pod")
}

/// A token for the ServiceAccount, bound to `pod`.
async fn token(accounts: &Api<ServiceAccount>, pod: &Pod) -> anyhow::Result<String> {
    let request = crate::tokens::pod_token_request(NAME, names::TOKEN_EXPIRATION_SECONDS, pod);
    accounts
        .create_token_request(NAME, &PostParams::default(), &request)
        .await
        .context("requesting a token")?
        .status
        .map(|s| s.token)
        .context("the TokenRequest was answered without a token")
}

/// One review of `token`, timed; an error unless it authenticated.
async fn review(reviews: &Api<TokenReview>, token: String) -> anyhow::Result<Duration> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            audiences: Some(vec![NAME.to_owned()]),
            token: Some(token),
        },
        ..Default::default()
    };
    let started = Instant::now();
    let answer = reviews
        .create(&PostParams::default(), &review)
        .await
        .context("the TokenReview")?;
    let took = started.elapsed();
    let status = answer.status.unwrap_or_default();
    if status.authenticated != Some(true) {
        bail!("a token was not authenticated: {:?}", status.error);
    }
    Ok(took)
}
