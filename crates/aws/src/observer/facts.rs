//! The fact list: every [`AwsFacts`] field, declared once with the read that fills it, from which
//! the current facts, the last good facts and the stale notes of an observation are all derived.
//! No IO (the providers read; this only places their answers).
//!
//! A provider is the `async fn` of the service module that reads one fact through its caches
//! (`sts::account`, `eks::eks_cluster_fact`, ...) and answers a [`FactRead`]: the one value that
//! knows its field's current answer, its last good answer and whether it is stale
//! (`fact_read.rs`).
//!
//! Adding an AWS fact:
//! - one that needs only the request and the answers of the first three stages (most do): its
//!   field in `AwsFacts` (checks crate) and one file in `providers/`, named like the field, with
//!   its cache and its read (`providers.rs` says what the file declares). Nothing else.
//! - one that later reads depend on: its field, its provider in the service module, one row in
//!   `fact_list!` below, its call in the stage of `observe.rs` whose answers it needs, and its
//!   cache in `Inner` (`mod.rs`), `construct.rs` and `revalidate.rs`.
//!
//! For a new AWS API, also the port method (`ports.rs`, the SDK and the fake) and its action in
//! `deploy/iam-policy.json`.

use super::StaleFact;
use super::fact_read::{AsIs, Conditional, FactRead, Unlisted};
use crate::cache::Read;
use karpenter_health_checks::facts::{
    AccessEntryFacts, AccountFacts, AwsFacts, ControllerRoleFacts, EbsEncryptionFacts,
    EksClusterFacts, InstanceFacts, InstanceProfileFacts, InstanceTypeCatalog, KmsKeyFacts,
    Observed, PermissionFacts, QueueFacts, SecurityGroupFacts, SubnetFacts, VpcNetworkFacts,
};
use std::collections::BTreeMap;

/// Declares [`FactReads`], one member per listed `AwsFacts` field plus the providers of
/// `providers/`, and derives the three views of an observation from it. Listing a field twice
/// does not compile; a field neither listed nor provided by a file of `providers/` fails
/// `every_aws_fact_has_exactly_one_row_in_the_fact_list`.
macro_rules! fact_list {
    ($($field:ident: $read:ty,)*) => {
        /// What the providers read for one EC2NodeClass, one member per `AwsFacts` field, and
        /// what the providers of `providers/` read.
        pub(super) struct FactReads {
            $(pub(super) $field: $read,)*
            pub(super) providers: super::providers::Reads,
        }

        impl FactReads {
            /// The `AwsFacts` fields, in the order of the list (the order of the stale notes).
            #[cfg(test)]
            pub(super) const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// What to evaluate: unknown where the latest read failed.
            pub(super) fn current(&self) -> AwsFacts {
                let mut facts = AwsFacts { $($field: self.$field.current(),)* ..AwsFacts::default() };
                self.providers.current_into(&mut facts);
                facts
            }

            /// The last found/absent answer of every fact.
            pub(super) fn last_good(&self) -> AwsFacts {
                let mut facts = AwsFacts { $($field: self.$field.last_good(),)* ..AwsFacts::default() };
                self.providers.last_good_into(&mut facts);
                facts
            }

            /// The facts that are unknown now but have an older good answer: the list's in its
            /// order, then those of `providers/`.
            pub(super) fn stale(&self) -> Vec<StaleFact> {
                let mut stale = Vec::new();
                $(self.$field.note_stale(stringify!($field), &mut stale);)*
                self.providers.note_stale(&mut stale);
                stale
            }
        }
    };
}

// The order of the rows is the order of the stale notes.
fact_list! {
    region: AsIs<Option<String>>,
    account: Read<AccountFacts>,
    instance_profile: Option<Read<InstanceProfileFacts>>,
    node_role: super::iam::RoleReads,
    eks_cluster: Conditional<Read<EksClusterFacts>>,
    node_role_access_entries: Conditional<Read<Vec<AccessEntryFacts>>>,
    pod_identity_roles: super::pod_identity::EffectiveRoles,
    pod_identity_via: super::pod_identity::ViaRoles,
    security_groups: Read<Vec<SecurityGroupFacts>>,
    subnets: Read<Vec<SubnetFacts>>,
    controller_role: Option<Read<ControllerRoleFacts>>,
    controller_permissions: AsIs<Option<PermissionFacts>>,
    oidc_providers: Unlisted<Conditional<Read<Vec<String>>>>,
    interruption_queue: Option<Read<QueueFacts>>,
    cluster_instances: Conditional<Read<Vec<InstanceFacts>>>,
    cluster_vpc: Observed<String>,
    vpc_networks: AsIs<BTreeMap<String, Observed<VpcNetworkFacts>>>,
    instance_types: Option<Read<InstanceTypeCatalog>>,
    vcpu_quotas: Option<super::quotas::QuotaReads>,
    ami_parameters: Option<super::amis::AmiReads>,
    ebs_encryption: Option<Read<EbsEncryptionFacts>>,
    kms_keys: BTreeMap<String, Read<KmsKeyFacts>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top-level field names of `AwsFacts`, as its `Debug` output names them.
    fn aws_facts_fields() -> Vec<String> {
        format!("{:#?}", AwsFacts::default())
            .lines()
            .filter_map(|line| line.strip_prefix("    "))
            .filter(|line| !line.starts_with(' '))
            .filter_map(|line| line.split_once(':').map(|(name, _)| name.to_owned()))
            .collect()
    }

    #[test]
    fn every_aws_fact_has_exactly_one_row_in_the_fact_list() {
        let mut listed: Vec<&str> = FactReads::FIELDS.to_vec();
        listed.extend(super::super::providers::Reads::FIELDS);
        listed.sort_unstable();
        let before = listed.len();
        listed.dedup();
        assert_eq!(listed.len(), before, "a field is listed twice");
        let mut fields = aws_facts_fields();
        fields.sort();
        // The Debug parse found the fields (the first, one of the middle, the last).
        for known in ["region", "instance_types", "kms_keys"] {
            assert!(fields.iter().any(|f| f == known), "{known}: {fields:?}");
        }
        assert_eq!(listed, fields);
    }
}
