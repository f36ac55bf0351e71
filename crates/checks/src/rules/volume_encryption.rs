//! `VolumeEncryptionReady`: the KMS keys this EC2NodeClass's EBS volumes are encrypted with (named
//! in `spec.blockDeviceMappings[].ebs.kmsKeyID`, or the account's default EBS key) exist, are
//! enabled, and their key policy lets EC2 use them on the account's behalf. A key EC2 may not
//! use makes every node terminate seconds after launch with `Client.InternalError`
//! (aws/karpenter-provider-aws #1407, #3767), and Karpenter only sees the instance vanish.
//! Pure: no IO.

use crate::facts::{KmsGrantFacts, KmsKeyFacts, Observed};
use crate::iam_policy::{self, Decision, Named, Principal, Request};
use crate::karpenter_permissions::{Verdict, verdict};
use crate::plan::Context;
use crate::plan::volume_keys::{
    AWS_MANAGED_EBS_ALIAS, DefaultKeyUse, EC2_KMS_ACTIONS, ec2_use_context,
    is_aws_managed_ebs_alias, volume_keys,
};
use crate::verdict::{Check, Outcome, Rule, Why};
use karpenter_health_api::{ConditionType, Reason, SubjectRef};

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::VolumeEncryptionReady, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::VolumeEncryptionReady, "volume-encryption");
    let keys = volume_keys(&ctx.facts.cluster.node_class);
    // (reference, how the volumes come to use it)
    let mut refs: Vec<(String, &str)> = keys
        .named
        .iter()
        .map(|k| (k.clone(), "named in spec.blockDeviceMappings"))
        .collect();
    let mut default_off = false;
    if keys.default != DefaultKeyUse::Never {
        match &ctx.facts.aws.ebs_encryption {
            None | Some(Observed::Absent) => c.unknown(Why::new(
                Reason::NotObserved,
                "The account's EBS encryption defaults have not been read yet.",
            )),
            Some(Observed::Unknown(u)) => {
                c.unknown(Why::unobserved("The account's EBS encryption defaults", u))
            }
            Some(Observed::Found(e)) if keys.default == DefaultKeyUse::Always || e.by_default => {
                match &e.default_kms_key_id {
                    Observed::Found(id) => refs.push((id.clone(), "the account's default EBS key")),
                    Observed::Absent => refs.push((
                        AWS_MANAGED_EBS_ALIAS.to_owned(),
                        "the account's default EBS key",
                    )),
                    Observed::Unknown(u) => {
                        c.unknown(Why::unobserved("The account's default EBS KMS key", u))
                    }
                }
            }
            Some(Observed::Found(_)) => default_off = true,
        }
    }
    if refs.is_empty() {
        let message = if default_off {
            "No volume names a KMS key and the account does not encrypt EBS by default: nothing \
             to check."
        } else {
            "Every volume names no KMS key: nothing to check."
        };
        return c.finish(Reason::VolumeEncryptionNotUsed, message);
    }
    let mut usable = Vec::new();
    for (key, origin) in &refs {
        if is_aws_managed_ebs_alias(key) {
            usable.push(format!("{key} (AWS-managed)"));
            continue;
        }
        let shown = crate::clip(key, 256);
        match ctx.facts.aws.kms_keys.get(key) {
            None => c.unknown(Why::new(
                Reason::NotObserved,
                format!("KMS key {shown} ({origin}) has not been looked up yet."),
            )),
            Some(Observed::Unknown(u)) => {
                c.unknown(Why::unobserved(&format!("KMS key {shown} ({origin})"), u))
            }
            Some(Observed::Absent) => c.fail(
                Reason::KmsKeyNotFound,
                format!(
                    "KMS key {shown} ({origin}) does not exist: every node of this EC2NodeClass \
                     terminates seconds after launch (Client.InternalError)."
                ),
                vec![ctx.node_class_subject(), SubjectRef::new("KMSKey", &*shown)],
            ),
            Some(Observed::Found(k)) => {
                if check_key(ctx, &mut c, &shown, origin, k) {
                    usable.push(shown.into_owned());
                }
            }
        }
    }
    let ok = format!(
        "The volumes' KMS keys are usable by EC2: {}.",
        crate::wording::list_bounded(&usable, 3)
    );
    c.finish(Reason::VolumeEncryptionKeysUsable, ok)
}

/// Judges one key that exists; true when it is usable.
fn check_key(ctx: &Context, c: &mut Check, shown: &str, origin: &str, k: &KmsKeyFacts) -> bool {
    if !state_usable(ctx, c, shown, origin, k) {
        return false;
    }
    if k.manager.eq_ignore_ascii_case("AWS") {
        // AWS-managed keys' policies admit EC2 in their own account; they cannot be changed.
        return true;
    }
    let Some(document) = key_policy(ctx, c, shown, origin, k) else {
        return false;
    };
    let Some(region) = ctx.facts.aws.region.as_deref() else {
        c.unknown(Why::new(
            Reason::RegionUnknown,
            "The region is unknown, so kms:ViaService for EC2 cannot be decided.",
        ));
        return false;
    };
    let Some(account) = ctx.facts.aws.account.found() else {
        let why = match ctx.facts.aws.account.unobserved() {
            Some(u) => Why::unobserved("The operator's AWS account", u),
            None => Why::new(Reason::NotObserved, "The AWS account is not known."),
        };
        c.unknown(why);
        return false;
    };
    let Some(policy) = parsed_policy(c, shown, document, &account.partition) else {
        return false;
    };
    let root = format!("arn:{}:iam::{}:root", account.partition, account.account_id);
    let controller = controller_role_arn(ctx);
    let verdicts = judge_actions(
        k,
        &policy,
        &root,
        controller.as_ref(),
        region,
        &account.account_id,
    );
    report_verdicts(
        c,
        shown,
        origin,
        region,
        controller.as_deref(),
        verdicts,
        || key_subjects(ctx, k),
    )
}

/// The class and the key, as a finding's subjects.
fn key_subjects(ctx: &Context, k: &KmsKeyFacts) -> Vec<SubjectRef> {
    vec![
        ctx.node_class_subject(),
        SubjectRef::new("KMSKey", crate::clip(&k.arn, 256)),
    ]
}

/// Whether the key's state lets EC2 use it: False when disabled, pending deletion or without
/// key material, Unknown in a transient state.
fn state_usable(ctx: &Context, c: &mut Check, shown: &str, origin: &str, k: &KmsKeyFacts) -> bool {
    let state_reason = match k.state.as_str() {
        "Enabled" => None,
        "Disabled" => Some((Reason::KmsKeyDisabled, "is disabled")),
        "PendingDeletion" => Some((Reason::KmsKeyPendingDeletion, "is pending deletion")),
        "PendingImport" => Some((Reason::KmsKeyPendingImport, "has no key material imported")),
        other => {
            c.unknown(Why::new(
                Reason::KmsKeyStateTransient,
                format!(
                    "KMS key {shown} ({origin}) is in state {}, so whether EC2 can use it is not \
                     decided.",
                    crate::clip(other, 64)
                ),
            ));
            return false;
        }
    };
    if let Some((reason, what)) = state_reason {
        c.fail(
            reason,
            format!(
                "KMS key {shown} ({origin}) {what}: every node of this EC2NodeClass terminates \
                 seconds after launch (Client.InternalError)."
            ),
            key_subjects(ctx, k),
        );
        return false;
    }
    true
}

/// The key's policy document, or why it is not known.
fn key_policy<'k>(
    ctx: &Context,
    c: &mut Check,
    shown: &str,
    origin: &str,
    k: &'k KmsKeyFacts,
) -> Option<&'k String> {
    match &k.policy {
        Observed::Found(d) => Some(d),
        Observed::Absent => {
            c.unknown(Why::new(
                Reason::NotObserved,
                format!("KMS key {shown} ({origin}) returned no key policy."),
            ));
            None
        }
        Observed::Unknown(u) => {
            let other_account = key_account(&k.arn)
                .zip(ctx.facts.aws.account.found())
                .filter(|(owner, me)| *owner != me.account_id)
                .map(|(owner, _)| format!(" (a key of account {owner})"))
                .unwrap_or_default();
            c.unknown(Why::unobserved(
                &format!("The key policy of KMS key {shown}{other_account}"),
                u,
            ));
            None
        }
    }
}

/// The key policy parsed, with each bare account id as principal read as that account's root
/// (IAM's policy grammar); Unknown when it cannot be parsed.
fn parsed_policy(
    c: &mut Check,
    shown: &str,
    document: &str,
    partition: &str,
) -> Option<iam_policy::Policy> {
    let mut policy = match iam_policy::parse(document) {
        Ok(p) => p,
        Err(e) => {
            // KMS only stores valid policies: a document this parser cannot read is our gap.
            c.unknown(Why::new(
                Reason::PolicyUndecided,
                format!(
                    "The key policy of KMS key {shown} could not be evaluated ({}).",
                    crate::clip(&e.0, 256)
                ),
            ));
            return None;
        }
    };
    // A bare account id as principal means the account's root (IAM's policy grammar).
    for s in &mut policy.statements {
        if let Some(p) = &mut s.principals {
            for a in &mut p.aws {
                if a.len() == 12 && a.bytes().all(|b| b.is_ascii_digit()) {
                    *a = format!("arn:{partition}:iam::{a}:root");
                }
            }
        }
    }
    Some(policy)
}

/// The actions EC2 needs on a key that are denied by its policy, denied by the controller's
/// IAM policies, or undecided, each worded for a message.
#[derive(Default)]
struct KeyVerdicts {
    denied: Vec<String>,
    denied_by_iam: Vec<String>,
    undecided: Vec<String>,
}

/// Judges each action EC2 needs on key `k` for the account root and the controller's role, by
/// the key policy, the controller's grants and, where the policy defers to IAM, its IAM policies.
fn judge_actions(
    k: &KmsKeyFacts,
    policy: &iam_policy::Policy,
    root: &str,
    controller: Option<&String>,
    region: &str,
    account_id: &str,
) -> KeyVerdicts {
    let mut candidates = vec![Principal::Aws(root.to_owned())];
    if let Some(arn) = controller {
        candidates.push(Principal::Aws(arn.clone()));
    }
    let context = ec2_use_context(region, account_id);
    let named = [Named {
        name: "key policy default",
        policy,
    }];
    let mut v = KeyVerdicts::default();
    for action in EC2_KMS_ACTIONS {
        let decisions: Vec<Decision> = candidates
            .iter()
            .map(|p| {
                iam_policy::evaluate(
                    &named,
                    &Request {
                        principal: Some(p),
                        action,
                        resource: &k.arn,
                        context: &context,
                    },
                )
            })
            .collect();
        let explicit = decisions.iter().find_map(|d| match d {
            Decision::ExplicitDeny(at) => Some(at),
            _ => None,
        });
        let by_root = decisions.first().is_some_and(Decision::is_allowed);
        let by_controller = decisions.get(1).is_some_and(Decision::is_allowed);
        if let Some(at) = explicit {
            let at: Vec<String> = at.iter().map(ToString::to_string).collect();
            v.denied
                .push(format!("{action} (denied by {})", at.join(", ")));
        } else if by_controller {
            continue;
        } else if by_root
            && controller_grant(&k.controller_grants, action)
                .is_none_or(|g| matches!(g, GrantAnswer::Undecided(_)))
        {
            // The key policy allows the account root: IAM policies decide (the KMS developer
            // guide's "Allows access to the AWS account and enables IAM policies"), so the
            // controller's role must be allowed by its own (aws/karpenter-provider-aws #3767).
            match delegated_to_iam(k, controller.map(String::as_str), action) {
                IamAnswer::Allowed => {}
                IamAnswer::Denied(by) => v.denied_by_iam.push(format!("{action} ({by})")),
                IamAnswer::Undecided(why) => v.undecided.push(format!("{action}: {why}")),
            }
        } else if let Some(grant) =
            controller.and_then(|_| controller_grant(&k.controller_grants, action))
        {
            // A grant lets the controller use the key beyond the key policy (an explicit deny
            // in the policy would still win, and was handled above).
            match grant {
                GrantAnswer::Granted => continue,
                GrantAnswer::Undecided(why) => v.undecided.push(format!("{action}: {why}")),
            }
        } else if let Some(Decision::Undecided(why)) = decisions
            .iter()
            .find(|d| matches!(d, Decision::Undecided(_)))
        {
            v.undecided.push(format!("{action}: {}", why.join("; ")));
        } else if controller.is_none() && names_specific_principals(policy, root) {
            v.undecided.push(format!(
                "{action}: allowed only to named principals, and the Karpenter controller's \
                 role is not known"
            ));
        } else {
            v.denied.push(action.to_owned());
        }
    }
    v
}

/// Words the verdicts on a key: False when its policy or the controller's IAM policies deny
/// an action EC2 needs, Unknown when one is undecided; true when the key is usable.
fn report_verdicts(
    c: &mut Check,
    shown: &str,
    origin: &str,
    region: &str,
    controller: Option<&str>,
    v: KeyVerdicts,
    subjects: impl Fn() -> Vec<SubjectRef>,
) -> bool {
    if !v.denied.is_empty() {
        c.fail(
            Reason::KmsKeyPolicyDeniesEc2,
            format!(
                "The key policy of KMS key {shown} ({origin}) does not let EC2 use it on the \
                 account's behalf: {} not allowed to the account root or the Karpenter \
                 controller's role (by the key policy or a grant), nor through \
                 ec2.{region}.amazonaws.com. Nodes of this EC2NodeClass terminate seconds after \
                 launch (Client.InternalError).",
                crate::wording::list_bounded(&v.denied, 3)
            ),
            subjects(),
        );
        return false;
    }
    if !v.denied_by_iam.is_empty() {
        c.fail(
            Reason::KmsKeyNotAllowedForController,
            format!(
                "The key policy of KMS key {shown} ({origin}) leaves its use to the account's IAM \
                 policies, and those of the Karpenter controller's role {} do not allow {} on it \
                 through ec2.{region}.amazonaws.com. Nodes of this EC2NodeClass terminate \
                 seconds after launch (Client.InternalError).",
                crate::clip(controller.unwrap_or_default(), 256),
                crate::wording::list_bounded(&v.denied_by_iam, 3)
            ),
            subjects(),
        );
        return false;
    }
    if !v.undecided.is_empty() {
        c.unknown(Why::new(
            Reason::PolicyUndecided,
            format!(
                "Whether the key policy of KMS key {shown} lets EC2 use it is undecided: {}.",
                crate::clip(&crate::wording::list_bounded(&v.undecided, 2), 512)
            ),
        ));
        return false;
    }
    true
}

/// What the account's IAM policies say about the controller's role using a key through EC2.
enum IamAnswer {
    Allowed,
    Denied(String),
    Undecided(String),
}

/// IAM's simulator's answer for the controller's role and `action` on key `k`.
fn delegated_to_iam(k: &KmsKeyFacts, controller: Option<&str>, action: &str) -> IamAnswer {
    if controller.is_none() {
        return IamAnswer::Undecided(
            "the key policy leaves it to IAM policies, and the Karpenter controller's role is \
             not known"
                .into(),
        );
    }
    match &k.controller_iam {
        Observed::Found(decisions) => {
            let Some(d) = decisions
                .iter()
                .find(|d| d.action.eq_ignore_ascii_case(action) && d.resource == k.arn)
            else {
                return IamAnswer::Undecided(
                    "IAM's simulator gave no answer for the controller's role".into(),
                );
            };
            match verdict(d) {
                Verdict::Allowed => IamAnswer::Allowed,
                Verdict::Denied(by) => IamAnswer::Denied(by),
                Verdict::Undecided(why) => IamAnswer::Undecided(why),
            }
        }
        Observed::Unknown(u) => IamAnswer::Undecided(format!(
            "the key policy leaves it to IAM policies, and IAM's simulator could not be asked \
             about the controller's role ({})",
            crate::clip(&u.detail, 160)
        )),
        Observed::Absent => IamAnswer::Undecided(
            "the key policy leaves it to IAM policies, and the controller's role vanished".into(),
        ),
    }
}

/// What the controller's grants on a key say about one action.
enum GrantAnswer {
    Granted,
    Undecided(String),
}

/// Whether the grants to the controller's role settle `action` (`kms:Decrypt`, ...); `None` when
/// they say nothing (no grant covers it). Asked only when the controller's role is known.
fn controller_grant(grants: &Observed<Vec<KmsGrantFacts>>, action: &str) -> Option<GrantAnswer> {
    let operation = action.strip_prefix("kms:").unwrap_or(action);
    match grants {
        Observed::Found(grants) => {
            let covering = || {
                grants
                    .iter()
                    .filter(|g| g.operations.iter().any(|o| o == operation))
            };
            if covering().any(|g| !g.constrained) {
                Some(GrantAnswer::Granted)
            } else if covering().next().is_some() {
                Some(GrantAnswer::Undecided(
                    "granted to the controller's role only under an encryption context \
                     constraint"
                        .to_owned(),
                ))
            } else {
                None
            }
        }
        Observed::Unknown(u) => Some(GrantAnswer::Undecided(format!(
            "not allowed by the key policy, and the key's grants to the controller's role could \
             not be read ({})",
            crate::clip(&u.detail, 160)
        ))),
        Observed::Absent => None,
    }
}

/// The account of a KMS key ARN (`arn:aws:kms:us-west-2:111122223333:key/...`).
fn key_account(arn: &str) -> Option<&str> {
    arn.split(':').nth(4).filter(|a| !a.is_empty())
}

fn controller_role_arn(ctx: &Context) -> Option<String> {
    if let Some(Observed::Found(role)) = &ctx.facts.aws.controller_role {
        return Some(role.arn.clone());
    }
    ctx.facts
        .cluster
        .karpenter
        .found()
        .and_then(|k| k.controller_role_arn.clone())
}

/// Whether an `Allow` statement names AWS principals other than the account root or everyone.
fn names_specific_principals(policy: &iam_policy::Policy, root: &str) -> bool {
    policy.statements.iter().any(|s| {
        s.allow
            && s.principals
                .as_ref()
                .is_some_and(|p| !p.everyone && p.aws.iter().any(|a| a != root))
    })
}
