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
//! 1. its field in `AwsFacts` (checks crate);
//! 2. its provider in the service module, answering a [`FactRead`] whose `Field` is the field's
//!    type (most answer a [`Read`], an `Option` of one when it is not always asked, or a
//!    [`Conditional`] read);
//! 3. one row in `fact_list!` below: the field and the type its provider answers;
//! 4. its call in the stage of `observe.rs` whose answers it needs (the compiler names the
//!    missing field there);
//! 5. for a new AWS API, the port method (`ports.rs`, the SDK and the fake) and its cache: a field
//!    of `Inner` (`mod.rs`), built in `construct.rs` and listed in `revalidate.rs`.
//!
//! Nothing else: the current facts, the last good facts and the stale notes follow from the row.

use super::StaleFact;
use super::fact_read::{AsIs, Conditional, FactRead, Unlisted};
use crate::cache::Read;
use karpenter_health_checks::facts::{
    AccessEntryFacts, AccountFacts, AwsFacts, CapacityReservationFacts, ControllerRoleFacts,
    EbsEncryptionFacts, EksClusterFacts, ImageFacts, InstanceFacts, InstanceProfileFacts,
    InstanceTypeCatalog, KmsKeyFacts, Observed, PermissionFacts, QueueFacts, SecurityGroupFacts,
    SubnetFacts, VpcNetworkFacts,
};
use std::collections::BTreeMap;

/// Declares [`FactReads`], one member per `AwsFacts` field, and derives the three views of an
/// observation from it. Listing a field twice, or leaving one out, does not compile: the
/// `AwsFacts` literals below name every field.
macro_rules! fact_list {
    ($($field:ident: $read:ty,)*) => {
        /// What the providers read for one EC2NodeClass, one member per `AwsFacts` field.
        pub(super) struct FactReads {
            $(pub(super) $field: $read,)*
        }

        impl FactReads {
            /// The `AwsFacts` fields, in the order of the list (the order of the stale notes).
            #[cfg(test)]
            pub(super) const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// What to evaluate: unknown where the latest read failed.
            pub(super) fn current(&self) -> AwsFacts {
                AwsFacts { $($field: self.$field.current(),)* }
            }

            /// The last found/absent answer of every fact.
            pub(super) fn last_good(&self) -> AwsFacts {
                AwsFacts { $($field: self.$field.last_good(),)* }
            }

            /// The facts that are unknown now but have an older good answer.
            pub(super) fn stale(&self) -> Vec<StaleFact> {
                let mut stale = Vec::new();
                $(self.$field.note_stale(stringify!($field), &mut stale);)*
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
    spot_service_linked_role: Unlisted<Option<Read<String>>>,
    cluster_instances: Conditional<Read<Vec<InstanceFacts>>>,
    cluster_vpc: Observed<String>,
    vpc_networks: AsIs<BTreeMap<String, Observed<VpcNetworkFacts>>>,
    instance_types: Option<Read<InstanceTypeCatalog>>,
    vcpu_quotas: Option<super::quotas::QuotaReads>,
    open_capacity_reservations: Option<Read<Vec<CapacityReservationFacts>>>,
    ami_parameters: Option<super::amis::AmiReads>,
    images: Option<Read<Vec<ImageFacts>>>,
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
        listed.sort_unstable();
        let before = listed.len();
        listed.dedup();
        assert_eq!(listed.len(), before, "a field is listed twice");
        let mut fields = aws_facts_fields();
        fields.sort();
        assert_eq!(fields.len(), 25, "{fields:?}");
        assert_eq!(listed, fields);
    }
}
