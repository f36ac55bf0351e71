//! SSM reads of the observer for `AmisResolvable`: the public parameters an EC2NodeClass's AMI
//! `alias` resolves through, for the cluster's Kubernetes minor and, for a pinned alias, the next
//! minor. Karpenter takes the minor from the API server's `/version`, or from EKS
//! DescribeCluster with `EKS_CONTROL_PLANE=true` (aws/karpenter-provider-aws
//! `pkg/providers/version/version.go`); on EKS both name the same minor. EKS's answer is used
//! when there is one; when EKS could not be read the minor is not guessed (unknown), and only
//! where EKS has no such cluster does the API server's version decide.
//! One key per parameter name, shared by every class with the same alias, in the catalog family
//! (AWS publishes images for a minor once; a new minor's appear within the period, or at once on
//! evidence). The class's images are read by `providers/images.rs`. Does IO (through the SSM
//! port).
//!
//! Provides the fact `ami_parameters`.

use super::fact_read::{FactRead, note};
use super::{AwsObserver, AwsRequest, StaleFact};
use crate::cache::Read;
use crate::ports::Service;
use futures::future::join_all;
use karpenter_health_checks::facts::{AmiParameters, EksClusterFacts, Observed};
use karpenter_health_checks::plan::ami_alias::{Alias, minor_of};

/// The parameters as read, with the minor they were built for.
pub(super) struct AmiReads {
    kubernetes_minor: Result<String, Observed<AmiParameters>>,
    reads: Vec<(String, Read<String>)>,
}

impl AmiReads {
    fn collect(&self, pick: impl Fn(&Read<String>) -> Observed<String>) -> Observed<AmiParameters> {
        match &self.kubernetes_minor {
            Ok(minor) => Observed::Found(AmiParameters {
                kubernetes_minor: minor.clone(),
                values: self
                    .reads
                    .iter()
                    .map(|(name, read)| (name.clone(), pick(read)))
                    .collect(),
            }),
            Err(unknown) => unknown.clone(),
        }
    }
}

impl FactRead for AmiReads {
    type Field = Observed<AmiParameters>;

    fn current(&self) -> Observed<AmiParameters> {
        self.collect(|r| r.current.clone())
    }

    fn last_good(&self) -> Observed<AmiParameters> {
        self.collect(|r| super::shared::good(r).unwrap_or_default())
    }

    /// One note, aged as the oldest parameter kept.
    fn note_stale(&self, fact: &'static str, stale: &mut Vec<StaleFact>) {
        let age = self.reads.iter().filter_map(|(_, r)| r.stale_age()).max();
        note(stale, fact, age);
    }
}

/// The cluster's Kubernetes minor: EKS's when EKS answered, the API server's only where EKS has
/// no such cluster; unknown (with the cause) while EKS cannot be read; `Ok(None)` when neither
/// names one.
pub(super) fn kubernetes_minor(
    eks: Option<&Observed<EksClusterFacts>>,
    apiserver_version: Option<&str>,
) -> Result<Option<String>, Observed<AmiParameters>> {
    match eks {
        Some(Observed::Found(cluster)) => Ok(cluster.version.as_deref().and_then(minor_of)),
        Some(Observed::Unknown(u)) => Err(Observed::Unknown(super::shared::because(
            "the cluster's Kubernetes version (EKS DescribeCluster) is not known",
            u,
        ))),
        Some(Observed::Absent) | None => Ok(apiserver_version.and_then(minor_of)),
    }
}

impl AwsObserver {
    /// Provider of `ami_parameters`, read when the class has an `alias` term.
    pub(super) async fn ami_parameters_fact(
        &self,
        request: &AwsRequest,
        eks: Option<&Read<EksClusterFacts>>,
    ) -> Option<AmiReads> {
        match request.ami_alias.as_deref() {
            Some(alias) => Some(
                self.ami_parameters(
                    alias,
                    eks.map(|r| &r.current),
                    request.apiserver_version.as_deref(),
                )
                .await,
            ),
            None => None,
        }
    }

    /// The parameters `alias` needs, once the cluster's minor is known from `eks` or
    /// `apiserver_version`.
    async fn ami_parameters(
        &self,
        alias: &str,
        eks: Option<&Observed<EksClusterFacts>>,
        apiserver_version: Option<&str>,
    ) -> AmiReads {
        let unread = |why: &str| AmiReads {
            kubernetes_minor: Err(super::shared::not_observed(why)),
            reads: Vec::new(),
        };
        let minor = match kubernetes_minor(eks, apiserver_version) {
            Ok(minor) => minor,
            Err(unknown) => {
                return AmiReads {
                    kubernetes_minor: Err(unknown),
                    reads: Vec::new(),
                };
            }
        };
        let Some(alias) = Alias::parse(alias) else {
            return unread("the alias is not one Karpenter resolves");
        };
        let Some(minor) = minor else {
            return unread(
                "the cluster's Kubernetes version is known neither from EKS nor from the API \
                 server, so the alias's parameters cannot be named",
            );
        };
        let names = alias.parameters_to_read(&minor);
        let reads = join_all(names.into_iter().map(|name| async move {
            let read = self.ssm_parameter(&name).await;
            (name, read)
        }))
        .await;
        AmiReads {
            kubernetes_minor: Ok(minor),
            reads,
        }
    }

    async fn ssm_parameter(&self, name: &str) -> Read<String> {
        let this = self.clone();
        let key = name.to_owned();
        self.inner
            .ssm_parameters
            .get(key.clone(), move || async move {
                this.load(
                    Service::Ssm,
                    "GetParameter",
                    &key,
                    this.inner.ssm.get_parameter(&key),
                )
                .await
            })
            .await
    }
}
