//! Evaluates EC2NodeClasses once, from listed cluster state and live AWS, and writes nothing: the
//! engine behind `karpenter-health check`, the same gather → evaluate steps the reconciler runs.
//! Does IO (list calls, AWS reads).

use crate::config::EvaluationConfig;
use crate::context::{AwsPort, sdk_config_from_environment};
use aws_credential_types::provider::ProvideCredentials as _;
use karpenter_health_api::KarpenterHealthStatus;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_aws::ObserverOptions;
use karpenter_health_checks::Facts;
use karpenter_health_kube_facts::listed;
use karpenter_health_kube_facts::snapshot::cluster_facts;
use kube::{Client, ResourceExt};

/// Why a one-shot evaluation could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum CannotRun {
    #[error(
        "cannot list EC2NodeClasses: {0} (is Karpenter installed, and may this identity list them?)"
    )]
    NodeClasses(#[source] kube::Error),
    #[error("EC2NodeClass {0} does not exist")]
    NoSuchNodeClass(String),
    #[error("no AWS credentials: {0}")]
    NoCredentials(String),
    #[error("no AWS region: give --region or set AWS_REGION")]
    NoRegion,
}

/// The outcome for one EC2NodeClass.
#[derive(Clone, Debug, PartialEq)]
pub enum ClassOutcome {
    /// Boxed: a status is large beside the error of the other variant.
    Evaluated(Box<KarpenterHealthStatus>),
    /// The object does not match the EC2NodeClass schema this tool knows; named with the error.
    Malformed(String),
}

/// One EC2NodeClass and what became of it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassReport {
    pub name: String,
    pub outcome: ClassOutcome,
}

/// The AWS side from the standard credential chain; refuses to start without credentials or a
/// region, since every AWS-derived check would be Unknown for a reason the user can fix now.
pub async fn aws_from_environment(region: Option<String>) -> Result<AwsPort, CannotRun> {
    let sdk_config = sdk_config_from_environment(region).await;
    if sdk_config.region().is_none() {
        return Err(CannotRun::NoRegion);
    }
    let provider = sdk_config
        .credentials_provider()
        .ok_or_else(|| CannotRun::NoCredentials("no credential provider configured".into()))?;
    provider
        .provide_credentials()
        .await
        .map_err(|e| CannotRun::NoCredentials(error_chain(&e)))?;
    Ok(AwsPort::from_sdk_config(
        &sdk_config,
        ObserverOptions::default(),
    ))
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// Evaluates the EC2NodeClasses named in `only` (every one when empty), in name order. `progress`
/// hears what is being read, for a terminal.
pub async fn evaluate_once(
    client: &Client,
    aws: &AwsPort,
    config: &EvaluationConfig,
    only: &[String],
    progress: &dyn Fn(&str),
) -> Result<Vec<ClassReport>, CannotRun> {
    progress("listing EC2NodeClasses");
    let mut node_classes = listed::list_node_classes(client)
        .await
        .map_err(CannotRun::NodeClasses)?;
    let name_of = |guarded: &kube::core::DeserializeGuard<EC2NodeClass>| match &guarded.0 {
        Ok(node_class) => node_class.name_any(),
        Err(invalid) => invalid.metadata.name.clone().unwrap_or_default(),
    };
    node_classes.sort_by_key(name_of);
    if let Some(missing) = only
        .iter()
        .find(|wanted| !node_classes.iter().any(|c| &name_of(c) == *wanted))
    {
        return Err(CannotRun::NoSuchNodeClass(missing.clone()));
    }
    node_classes.retain(|c| only.is_empty() || only.contains(&name_of(c)));

    progress(
        "listing NodePools, NodeClaims, pending Pods, aws-auth, Cilium's settings, the Karpenter controller and the AWS Load Balancer Controller",
    );
    let sources = listed::list_sources(client, &config.watch_targets()).await;
    let overrides = config.overrides();
    let settings = config.settings();
    // The Pods and PodDisruptionBudgets holding NodeClaims stuck terminating, if any is.
    let sources = listed::with_drains(
        client,
        sources,
        jiff::Timestamp::now() - settings.terminating_long_after,
    )
    .await;
    // The newest Pods of the DaemonSets that have Pods: Karpenter counts theirs, not the templates'.
    let sources = listed::with_daemonset_pods(client, sources).await;
    let total = node_classes.len();
    let mut reports = Vec::with_capacity(total);
    for (index, guarded) in node_classes.iter().enumerate() {
        let name = name_of(guarded);
        let outcome = match &guarded.0 {
            Err(invalid) => ClassOutcome::Malformed(invalid.error.to_string()),
            Ok(node_class) => {
                progress(&format!(
                    "reading IAM, EC2 and EKS for EC2NodeClass {name} ({}/{total})",
                    index + 1
                ));
                // gather, as the reconciler does, but from the lists
                let cluster = cluster_facts(node_class, &sources, &overrides);
                let request = karpenter_health_aws::AwsRequest::for_class(node_class, &cluster);
                let aws_facts = aws.source.observe(&request).await;
                let facts = Facts {
                    cluster,
                    aws: aws_facts,
                };
                // evaluate and render: no previous status, nothing is written
                let now = jiff::Timestamp::now();
                let mut status = karpenter_health_checks::evaluate(&facts, &settings, None, now);
                // One run has no history: "first seen" would only repeat the run's time.
                for finding in &mut status.findings {
                    finding.first_seen = None;
                }
                ClassOutcome::Evaluated(Box::new(status))
            }
        };
        reports.push(ClassReport { name, outcome });
    }
    Ok(reports)
}
