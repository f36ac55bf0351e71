//! The bench's NodeClaims: each as Karpenter 1.x creates it and the status it writes once the
//! node joined, deterministic per number so runs seed the same objects; seeding them through the
//! API server (at once, or paced over a duration for the NodeClaim storm), deleting them as
//! Karpenter terminates nodes, and timing the API server's own full list of them. Does IO (API
//! server).

use crate::seed::{FIELD_MANAGER, REGION, ZONES, node_class_name};
use crate::transient::{created, gone, retried};
use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use karpenter_health_api::karpenter::NodeClaim;
use karpenter_health_e2e::karpenter;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A realistic spread of instance types in a NodeClaim's requirements.
const INSTANCE_TYPES: [&str; 16] = [
    "m5.large",
    "m5.xlarge",
    "m5.2xlarge",
    "m5a.large",
    "m5a.xlarge",
    "m6i.large",
    "m6i.xlarge",
    "m6i.2xlarge",
    "c5.large",
    "c5.xlarge",
    "c6i.large",
    "c6i.xlarge",
    "r5.large",
    "r5.xlarge",
    "r6i.large",
    "r6i.xlarge",
];

/// A deterministic pseudo-random 64-bit value (splitmix64), so runs seed the same objects.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The name of NodeClaim number `n` of NodePool `pool`: Karpenter's `<pool>-<random>`, and the
/// number so that names never collide.
fn node_claim_name(n: usize, pool: &str) -> String {
    format!("{pool}-{:05x}-{n}", mix(n as u64) & 0xfffff)
}

/// NodeClaim number `n` as Karpenter 1.x creates it (labels, hash annotations, finalizer, owner
/// reference, requirements, resources) and the status it writes once the node joined.
fn node_claim(n: usize, pool: &(String, String), class: &str, now: &str) -> (String, Value, Value) {
    let h = mix(n as u64);
    let name = node_claim_name(n, &pool.0);
    let zone = ZONES[(h % 3) as usize];
    let instance_type = INSTANCE_TYPES[((h >> 8) % INSTANCE_TYPES.len() as u64) as usize];
    let (family, size) = instance_type.split_once('.').unwrap_or((instance_type, ""));
    let capacity_type = if h & 0x100 == 0 { "on-demand" } else { "spot" };
    let ip = format!("10.20.{}.{}", (h >> 16) % 48, (h >> 24) % 250 + 2);
    let node_name = format!("ip-{}.ec2.internal", ip.replace('.', "-"));
    let instance_id = format!("i-0{:016x}", mix(h ^ 7));
    let generation: String = family.chars().filter(char::is_ascii_digit).collect();
    let claim = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": pool.0,
                "karpenter.k8s.aws/ec2nodeclass": class,
                "karpenter.sh/capacity-type": capacity_type,
                "node.kubernetes.io/instance-type": instance_type,
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": REGION,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "karpenter.k8s.aws/instance-category": &family[..1],
                "karpenter.k8s.aws/instance-family": family,
                "karpenter.k8s.aws/instance-generation": generation,
                "karpenter.k8s.aws/instance-size": size,
                "karpenter.k8s.aws/instance-hypervisor": "nitro",
                "team": format!("team-{}", n % 5),
            },
            "annotations": {
                "karpenter.k8s.aws/ec2nodeclass-hash": format!("{}", mix(h)),
                "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
                "karpenter.sh/nodepool-hash": format!("{}", mix(h ^ 1)),
                "karpenter.sh/nodepool-hash-version": "v3",
                "karpenter.k8s.aws/tagged": "true",
            },
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": pool.0,
                                 "uid": pool.1, "blockOwnerDeletion": true}],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool.0]},
                {"key": "karpenter.k8s.aws/ec2nodeclass", "operator": "In", "values": [class]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": INSTANCE_TYPES},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ZONES},
            ],
            "resources": {"requests": {"cpu": "1510m", "memory": "3472Mi", "pods": "11"}},
            "expireAfter": "720h",
        },
    });
    let conditions: Vec<Value> = [
        "Launched",
        "Registered",
        "Initialized",
        "ConsistentStateFound",
        "Ready",
    ]
    .iter()
    .map(|t| karpenter::condition(t, "True", t, now, Some(1)))
    .collect();
    let status = json!({"status": {
        "providerID": format!("aws:///{zone}/{instance_id}"),
        "nodeName": node_name,
        "imageID": "ami-0a1b2c3d4e5f60718",
        "capacity": {"cpu": "2", "ephemeral-storage": "100Gi", "memory": "7910Mi", "pods": "29"},
        "allocatable": {"cpu": "1930m", "ephemeral-storage": "95551679124", "memory": "7220Mi", "pods": "29"},
        "lastPodEventTime": now,
        "conditions": conditions,
    }});
    (name, claim, status)
}

/// The NodePool and EC2NodeClass of NodeClaim number `n`: the NodePools round-robin, each
/// NodePool's class as `seed::kubernetes` made it.
fn placement(n: usize, pools: &[(String, String)], classes: usize) -> (&(String, String), String) {
    (
        &pools[n % pools.len()],
        node_class_name((n % pools.len()) % classes),
    )
}

fn node_claim_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<NodeClaim>(&()))
}

/// Creates NodeClaim number `n` and writes its status through the status subresource, as
/// Karpenter does once the node joined.
async fn create_with_status(
    api: &Api<DynamicObject>,
    n: usize,
    pools: &[(String, String)],
    classes: usize,
    now: &str,
) -> Result<()> {
    let (pool, class) = placement(n, pools, classes);
    let (name, claim, status) = node_claim(n, pool, &class, now);
    let object: DynamicObject = serde_json::from_value(claim)?;
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    created(retried(|| api.create(&params, &object)).await)
        .with_context(|| format!("creating NodeClaim {name}"))?;
    let status_params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    let status = Patch::Merge(status);
    retried(|| api.patch_status(&name, &status_params, &status))
        .await
        .with_context(|| format!("writing the status of NodeClaim {name}"))?;
    Ok(())
}

/// Creates NodeClaims `from..to` (`n` is spread over the NodePools round-robin) and writes their
/// status through the status subresource, `concurrency` at a time. Returns how long it took.
pub async fn seed(
    client: &kube::Client,
    pools: &[(String, String)],
    classes: usize,
    from: usize,
    to: usize,
    concurrency: usize,
) -> Result<Duration> {
    seed_paced(
        client,
        pools,
        classes,
        from..to,
        concurrency,
        Duration::ZERO,
    )
    .await
}

/// As [`seed`], but NodeClaim `from + i` is not created before `i / count` of `over` has passed,
/// so the creations spread evenly over `over` (a scale-up as Karpenter makes it), never more than
/// `concurrency` at a time. Returns how long it took.
pub async fn seed_paced(
    client: &kube::Client,
    pools: &[(String, String)],
    classes: usize,
    numbers: std::ops::Range<usize>,
    concurrency: usize,
    over: Duration,
) -> Result<Duration> {
    let api = node_claim_api(client);
    let now = jiff::Timestamp::now().to_string();
    let started = tokio::time::Instant::now();
    let count = numbers.len().max(1);
    let from = numbers.start;
    futures::stream::iter(numbers)
        .map(|n| {
            let api = &api;
            let now = &now;
            let not_before = started + over.mul_f64((n - from) as f64 / count as f64);
            async move {
                tokio::time::sleep_until(not_before).await;
                create_with_status(api, n, pools, classes, now).await
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await?;
    Ok(started.elapsed())
}

/// Deletes NodeClaims `numbers` as Karpenter does when it terminates nodes: the delete marks
/// each, then its termination finalizer is removed and the object goes; `concurrency` at a time.
/// Returns how long it took.
pub async fn delete(
    client: &kube::Client,
    pools: &[(String, String)],
    numbers: std::ops::Range<usize>,
    concurrency: usize,
) -> Result<Duration> {
    let api = node_claim_api(client);
    let started = Instant::now();
    let no_finalizers = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    futures::stream::iter(numbers)
        .map(|n| {
            let api = &api;
            let no_finalizers = &no_finalizers;
            let name = node_claim_name(n, &pools[n % pools.len()].0);
            async move {
                let params = DeleteParams::default();
                gone(retried(|| api.delete(&name, &params)).await)
                    .with_context(|| format!("deleting NodeClaim {name}"))?;
                let params = PatchParams::default();
                gone(retried(|| api.patch(&name, &params, no_finalizers)).await)
                    .with_context(|| format!("removing the finalizer of NodeClaim {name}"))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await?;
    Ok(started.elapsed())
}

/// Bytes on the wire and NodeClaims of a full list, 500 per page as the operator's watch reads
/// it, and how long the list took (the API server's share of a cold start).
pub async fn timed_list(client: &kube::Client) -> Result<(usize, usize, Duration)> {
    let started = Instant::now();
    let mut bytes = 0;
    let mut count = 0;
    let mut continue_token: Option<String> = None;
    loop {
        let mut uri = "/apis/karpenter.sh/v1/nodeclaims?limit=500".to_owned();
        if let Some(token) = &continue_token {
            uri.push_str("&continue=");
            uri.push_str(
                &percent_encoding::utf8_percent_encode(token, percent_encoding::NON_ALPHANUMERIC)
                    .to_string(),
            );
        }
        let request = hyper::Request::get(uri).body(Vec::new())?;
        let text = client.request_text(request).await?;
        bytes += text.len();
        let page: Value = serde_json::from_str(&text)?;
        count += page["items"].as_array().map_or(0, Vec::len);
        continue_token = page["metadata"]["continue"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        if continue_token.is_none() {
            break;
        }
    }
    Ok((bytes, count, started.elapsed()))
}
