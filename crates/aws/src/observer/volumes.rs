//! EC2 and KMS reads of the observer for `VolumeEncryptionReady`: the account's EBS encryption
//! defaults (GetEbsEncryptionByDefault, and GetEbsDefaultKmsKeyId only when the default key is
//! used), cached per account, and each KMS key the volumes use (DescribeKey, then GetKeyPolicy,
//! the controller's grants (ListGrants by grantee) and IAM's simulator on the controller's role
//! (SimulatePrincipalPolicy) for customer-managed keys), cached per key reference so classes
//! sharing a key share the reads. Does IO (through the EC2 and KMS
//! ports).
//!
//! Provides the facts `ebs_encryption` and `kms_keys`.

use super::shared::{Paged, because, not_observed};
use super::{AwsObserver, AwsRequest};
use crate::cache::Read;
use crate::ports::{Service, Simulation};
use karpenter_health_checks::facts::{
    EbsEncryptionFacts, KmsGrantFacts, KmsKeyFacts, Observed, SimulatedDecision, UnknownCause,
};
use karpenter_health_checks::plan::volume_keys::{
    DefaultKeyUse, EC2_KMS_ACTIONS, VolumeKeys, ec2_use_context, is_aws_managed_ebs_alias,
};
use std::collections::BTreeMap;

/// What the volume reads produced for one class.
struct VolumeReads {
    ebs: Option<Read<EbsEncryptionFacts>>,
    keys: BTreeMap<String, Read<KmsKeyFacts>>,
}

impl AwsObserver {
    /// Provider of `ebs_encryption` and `kms_keys`, read when the class's volumes are asked
    /// about: one read, since the account's default key is among the keys to read.
    pub(super) async fn volume_facts(
        &self,
        request: &AwsRequest,
        controller_role: Option<&str>,
    ) -> (
        Option<Read<EbsEncryptionFacts>>,
        BTreeMap<String, Read<KmsKeyFacts>>,
    ) {
        match &request.volume_keys {
            Some(keys) => {
                let reads = self.volumes(keys, controller_role).await;
                (reads.ebs, reads.keys)
            }
            None => (None, BTreeMap::new()),
        }
    }

    /// `controller_role`: the Karpenter controller's role ARN, whose grants on each
    /// customer-managed key are read too.
    async fn volumes(&self, keys: &VolumeKeys, controller_role: Option<&str>) -> VolumeReads {
        let ebs = match keys.default {
            DefaultKeyUse::Never => None,
            use_ => Some(self.ebs_encryption(use_ == DefaultKeyUse::Always).await),
        };
        let mut refs: Vec<String> = keys.named.iter().cloned().collect();
        if let Some(Observed::Found(e)) = ebs.as_ref().map(|r| &r.current)
            && let Observed::Found(id) = &e.default_kms_key_id
        {
            refs.push(id.clone());
        }
        refs.retain(|r| !is_aws_managed_ebs_alias(r));
        refs.sort();
        refs.dedup();
        let reads =
            futures::future::join_all(refs.iter().map(|r| self.kms_key(r, controller_role))).await;
        VolumeReads {
            ebs,
            keys: refs.into_iter().zip(reads).collect(),
        }
    }

    async fn ebs_encryption(&self, default_key_always: bool) -> Read<EbsEncryptionFacts> {
        let by_default = {
            let this = self.clone();
            self.inner
                .ebs_by_default
                .get((), move || async move {
                    this.load(
                        Service::Ec2,
                        "GetEbsEncryptionByDefault",
                        "",
                        this.inner.ec2.get_ebs_encryption_by_default(),
                    )
                    .await
                })
                .await
        };
        let enabled = match &by_default.current {
            Observed::Found(b) => *b,
            _ => false,
        };
        let key = if default_key_always || enabled {
            let this = self.clone();
            let read = self
                .inner
                .ebs_default_key
                .get((), move || async move {
                    this.load(
                        Service::Ec2,
                        "GetEbsDefaultKmsKeyId",
                        "",
                        this.inner.ec2.get_ebs_default_kms_key_id(),
                    )
                    .await
                })
                .await;
            // Not wrapped in `because`: the check already names the account's default key.
            read.current
        } else {
            not_observed("not needed: no volume uses the default key")
        };
        let compose = |b: &Observed<bool>| {
            b.clone().map(|by_default| EbsEncryptionFacts {
                by_default,
                default_kms_key_id: key.clone(),
            })
        };
        Read {
            current: compose(&by_default.current),
            last_good: by_default
                .last_good
                .as_ref()
                .map(|(o, age)| (compose(o), *age)),
        }
    }

    /// A key and its policy (cached per reference), with the controller's grants on it (cached
    /// per key and grantee) when it is customer-managed and the controller's role is known.
    async fn kms_key(&self, reference: &str, controller_role: Option<&str>) -> Read<KmsKeyFacts> {
        let key = self.kms_key_and_policy(reference).await;
        let customer_key = match &key.current {
            Observed::Found(k) if !k.manager.eq_ignore_ascii_case("AWS") => k.arn.clone(),
            _ => return key,
        };
        let Some(grantee) = controller_role else {
            return key;
        };
        let (grants, iam) = futures::join!(
            self.kms_grants(&customer_key, grantee),
            self.controller_key_iam(grantee, &customer_key)
        );
        let grants = grants.current;
        let with_grants = |o: &Observed<KmsKeyFacts>| {
            o.clone().map(|k| KmsKeyFacts {
                controller_grants: grants.clone(),
                controller_iam: iam.clone(),
                ..k
            })
        };
        Read {
            current: with_grants(&key.current),
            last_good: key
                .last_good
                .as_ref()
                .map(|(o, age)| (with_grants(o), *age)),
        }
    }

    /// IAM's simulator on the controller's role and EC2's uses of a customer-managed key, in the
    /// context EC2 asks KMS with: what decides when the key policy leaves the key to IAM
    /// policies. One simulation per (role, key), cached like the other permission answers.
    async fn controller_key_iam(
        &self,
        role_arn: &str,
        key_arn: &str,
    ) -> Observed<Vec<SimulatedDecision>> {
        let account = match self.account().await.current {
            Observed::Found(a) => a,
            Observed::Unknown(u) => return Observed::Unknown(because("account not read", &u)),
            Observed::Absent => return not_observed("the AWS account is not known"),
        };
        if let Ok(role) = karpenter_health_checks::arn::parse_iam(role_arn)
            && role.account != account.account_id
        {
            return Observed::unknown(
                UnknownCause::OtherAccount,
                format!("role {role_arn} is in account {}", role.account),
            );
        }
        let Some(region) = self.inner.region.as_deref() else {
            return not_observed("the AWS region is not known");
        };
        let context = ec2_use_context(region, &account.account_id)
            .entries()
            .map(|(k, v)| (k.to_owned(), v.to_vec()))
            .collect();
        self.simulate_one(Simulation {
            policy_source_arn: role_arn.to_owned(),
            actions: EC2_KMS_ACTIONS.iter().map(|a| (*a).to_owned()).collect(),
            resources: vec![key_arn.to_owned()],
            context,
        })
        .await
    }

    async fn kms_grants(&self, key_arn: &str, grantee: &str) -> Read<Vec<KmsGrantFacts>> {
        let this = self.clone();
        let (key_arn, grantee) = (key_arn.to_owned(), grantee.to_owned());
        self.inner
            .kms_grants
            .get((key_arn.clone(), grantee.clone()), move || async move {
                let kms = &this.inner.kms;
                let mut grants = Vec::new();
                let listed = this
                    .pages(
                        Service::Kms,
                        "ListGrants",
                        &key_arn,
                        |marker| kms.list_grants(&key_arn, &grantee, marker),
                        // KMS filters by grantee; filtered again for endpoints that do not.
                        |page| {
                            grants.extend(
                                page.into_iter()
                                    .filter(|g| g.grantee_principal == grantee)
                                    .map(|g| KmsGrantFacts {
                                        grantee_principal: g.grantee_principal,
                                        operations: g.operations,
                                        constrained: g.constrained,
                                    }),
                            );
                        },
                    )
                    .await?;
                Ok(match listed {
                    Paged::Complete => Some(grants),
                    // The key vanished between the reads: its DescribeKey answer decides.
                    Paged::Absent => None,
                })
            })
            .await
    }

    pub(super) async fn kms_key_and_policy(&self, reference: &str) -> Read<KmsKeyFacts> {
        let this = self.clone();
        let reference = reference.to_owned();
        self.inner
            .kms_keys
            .get(reference.clone(), move || async move {
                let kms = &this.inner.kms;
                let Some(key) = this
                    .load(
                        Service::Kms,
                        "DescribeKey",
                        &reference,
                        kms.describe_key(&reference),
                    )
                    .await?
                else {
                    return Ok(None);
                };
                // AWS-managed keys admit EC2 in their account by construction: no policy read.
                let policy = if key.manager.eq_ignore_ascii_case("AWS") {
                    not_observed("not read: an AWS-managed key")
                } else {
                    let by = if key.arn.is_empty() {
                        &key.key_id
                    } else {
                        &key.arn
                    };
                    match this
                        .load(Service::Kms, "GetKeyPolicy", by, kms.get_key_policy(by))
                        .await
                    {
                        Ok(Some(p)) => Observed::Found(p),
                        Ok(None) => Observed::Absent,
                        Err(u) => Observed::Unknown(u),
                    }
                };
                Ok(Some(KmsKeyFacts {
                    controller_iam: not_observed("not asked: the controller's role is not known"),
                    key_id: key.key_id,
                    arn: key.arn,
                    state: key.state,
                    manager: key.manager,
                    policy,
                    controller_grants: not_observed("not read: the controller's role is unknown"),
                }))
            })
            .await
    }
}
