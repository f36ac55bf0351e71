//! Verdict against behaviour, the five classic failures: each scenario runs the real Karpenter
//! controller (`e2e/bed/build-karpenter.sh`, the release `KH_KARPENTER_RELEASE` names) on the
//! bed's kube-apiserver 1.34 with the node stand-in, shows Karpenter doing what our verdict
//! says it does, and then the healthy twin (the same setup, the fault fixed) in which Karpenter
//! launches and every condition is True. Does IO (the bed, moto, Karpenter's process).
//!
//! Karpenter behaviour relied on (aws/karpenter-provider-aws and kubernetes-sigs/karpenter at the
//! pinned releases) is cited beside each scenario.

use anyhow::{Context as _, Result, ensure};
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::aws_seed::NODE_POLICIES_PULL_ONLY;
use karpenter_health_e2e::fixture::{CONTROLLER_POLICY, NODE_USERNAME, controller_policy};
use karpenter_health_e2e::health_status::condition_is;
use karpenter_health_e2e::lab::{LAUNCH, Lab, PROVISIONER_PASS, condition, release};
use karpenter_health_e2e::status_log::StatusLog;
use serde_json::json;
use std::time::Duration;

/// The ValidationStuck threshold the ARN scenario runs with: long enough that Karpenter requeues
/// its refused validation many times before it (a requeue backs off from 5 ms, doubling:
/// controller-runtime's default rate limiter), short enough for the bed (the default is 10 min).
const VALIDATION_STUCK: Duration = Duration::from_secs(45);

/// How long the node stand-in may take to judge a waiting kubelet again after aws-auth changed
/// (it looks again at least every 3 s, `e2e/src/node_stand_in.rs`).
const JUDGED_AGAIN: Duration = Duration::from_secs(30);

/// The instance-profile refusals the gap proxy made of Karpenter's launches as EC2 makes them:
/// (dry-run RunInstances, CreateFleet).
fn profile_refusals(lab: &Lab) -> (usize, usize) {
    let refusals = lab.fx.proxy.launch_refusals();
    let of = |operation: &str, dry_run: bool| {
        refusals
            .iter()
            .filter(|r| {
                r.operation == operation
                    && r.dry_run == dry_run
                    && r.message.contains("Invalid IAM Instance Profile name")
            })
            .count()
    };
    (of("RunInstances", true), of("CreateFleet", false))
}

/// Classic 2. Karpenter takes `spec.instanceProfile` as given and marks it ready without asking
/// IAM (`pkg/controllers/nodeclass/instanceprofile.go`); its validation's RunInstances dry run is
/// refused by EC2 ("Invalid IAM Instance Profile name", which the gap proxy answers as EC2 does
/// and counts) and requeued without a condition (`pkg/controllers/nodeclass/validation.go`,
/// `pkg/errors/errors.go` IsInstanceProfileNotFound), so ValidationSucceeded stays Unknown across
/// the requeues and the provisioner ignores the NodePool: nothing launches. ValidationStuck comes
/// only once the threshold has passed since Karpenter's Unknown, never before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_profile_arn_leaves_validation_unknown_and_karpenter_launches_nothing()
-> Result<()> {
    let lab = Lab::start_with_class(
        "lab-arn",
        "eu-west-1",
        |fx| json!({"instanceProfile": fx.profile_arn}),
    )
    .await?;
    let outcome: Result<()> = async {
        let verdicts = StatusLog::start(&lab.fx.admin, &lab.fx.name);
        let operator = lab
            .fx
            .start_operator_with(None, |config| {
                config.evaluation.validation_stuck_after = VALIDATION_STUCK;
            })
            .await?;
        // Only what Karpenter logs once the Pod waits: a healthy class warming up logs the same.
        let mark = lab.karpenter.mark();
        lab.workload("web", "500m").await?;
        lab.fx
            .wait_failed(&[
                (
                    ConditionType::InstanceProfileReady,
                    Reason::InstanceProfileIsArn,
                ),
                (
                    ConditionType::KarpenterStatusConsistent,
                    Reason::ValidationStuck,
                ),
            ])
            .await?;
        // What Karpenter does: the profile "ready", validation never concluding across its
        // requeues (each a dry run EC2 refused), no launch.
        lab.karpenter_condition("InstanceProfileReady", "True")
            .await?;
        lab.wait_logged_since(
            &mark,
            "ignoring nodepool, not ready",
            &[&lab.fx.name],
            PROVISIONER_PASS,
        )
        .await?;
        let class = lab.node_class().await?;
        let validation = condition(&class, "ValidationSucceeded")
            .context("Karpenter wrote no ValidationSucceeded")?;
        ensure!(
            validation["status"] == "Unknown",
            "validation: {validation}"
        );
        let (dry_runs, fleets) = profile_refusals(&lab);
        ensure!(
            dry_runs >= 2,
            "Karpenter's validation was refused {dry_runs} times: not seen across requeues"
        );
        ensure!(
            fleets == 0,
            "Karpenter launched a fleet while not validated"
        );
        ensure!(lab.node_claims().await?.is_empty(), "Karpenter launched");
        ensure!(
            lab.launched_instances().await?.is_empty(),
            "an instance was launched"
        );
        // Nothing said "stuck" before the threshold had passed since Karpenter's Unknown.
        let unknown_since: k8s_openapi::jiff::Timestamp = validation["lastTransitionTime"]
            .as_str()
            .context("ValidationSucceeded's lastTransitionTime")?
            .parse()?;
        let threshold = k8s_openapi::jiff::SignedDuration::try_from(VALIDATION_STUCK)?;
        let held = verdicts.stop().await;
        let stuck_at: Vec<_> = held
            .iter()
            .filter(|s| {
                condition_is(
                    s,
                    ConditionType::KarpenterStatusConsistent,
                    "False",
                    Reason::ValidationStuck,
                )
            })
            .filter_map(|s| s.condition(ConditionType::KarpenterStatusConsistent))
            .map(|c| c.last_transition_time.0)
            .collect();
        ensure!(!stuck_at.is_empty(), "no status said ValidationStuck");
        for at in stuck_at {
            ensure!(
                at.duration_since(unknown_since) >= threshold,
                "ValidationStuck at {at}, before {VALIDATION_STUCK:?} had passed since \
                 Karpenter's Unknown at {unknown_since}"
            );
        }

        // The healthy twin: the profile's name. Karpenter validates, launches, the node joins.
        let log = StatusLog::start(&lab.fx.admin, &lab.fx.name);
        lab.fx
            .patch_node_class_spec(json!({"instanceProfile": lab.fx.profile}))
            .await?;
        lab.wait_node_claim("Initialized", LAUNCH).await?;
        lab.fx.wait_healthy("once the profile is named").await?;
        let generation = lab.fx.node_class().await?.metadata.generation;
        let held = log.stop().await;
        ensure!(
            held.iter()
                .filter(|s| s.node_class_generation == generation)
                .all(|s| !condition_is(
                    s,
                    ConditionType::InstanceProfileReady,
                    "False",
                    Reason::InstanceProfileIsArn
                )),
            "the named profile was called an ARN"
        );
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// InstanceProfileReady: a profile name IAM has no profile of (a typo, a profile deleted or not
/// yet made). Karpenter takes the name as given, like the ARN; EC2 refuses its validation's dry
/// run with the same "Invalid IAM Instance Profile name" (the gap proxy asks moto's IAM, as EC2
/// resolves the name at launch), which Karpenter reads as a profile not yet propagated and
/// requeues (`pkg/controllers/nodeclass/validation.go`): validation never concludes and nothing
/// launches. The twin names the profile that exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_profile_iam_does_not_have_leaves_validation_unknown_and_launches_nothing()
-> Result<()> {
    let lab = Lab::start_with_class(
        "lab-no-profile",
        "eu-west-1",
        |fx| json!({"instanceProfile": format!("{}-missing", fx.profile)}),
    )
    .await?;
    let outcome: Result<()> = async {
        let operator = lab.fx.start_operator(None, false).await?;
        // Only what Karpenter logs once the Pod waits: a healthy class warming up logs the same.
        let mark = lab.karpenter.mark();
        lab.workload("web", "500m").await?;
        let status = lab
            .fx
            .wait_only_failed(
                ConditionType::InstanceProfileReady,
                Reason::InstanceProfileNotFound,
            )
            .await?;
        let message = karpenter_health_e2e::health_status::message(
            &status,
            ConditionType::InstanceProfileReady,
        );
        ensure!(message.contains("-missing"), "names the profile: {message}");
        // What Karpenter does: the profile "ready", validation refused again and again and
        // never concluding, the NodePool ignored, nothing launched.
        lab.karpenter_condition("InstanceProfileReady", "True")
            .await?;
        lab.wait_logged_since(
            &mark,
            "ignoring nodepool, not ready",
            &[&lab.fx.name],
            PROVISIONER_PASS,
        )
        .await?;
        karpenter_health_e2e::wait_for("two refused dry runs", PROVISIONER_PASS, || async {
            Ok((profile_refusals(&lab).0 >= 2).then_some(()))
        })
        .await?;
        let class = lab.node_class().await?;
        ensure!(
            !karpenter_health_e2e::lab::carries(&class, "ValidationSucceeded", "True"),
            "Karpenter validated a class whose profile IAM does not have"
        );
        ensure!(
            lab.node_claims().await?.is_empty() && lab.launched_instances().await?.is_empty(),
            "Karpenter launched"
        );
        // The twin: the profile that exists.
        lab.fx
            .patch_node_class_spec(json!({"instanceProfile": lab.fx.profile}))
            .await?;
        lab.wait_node_claim("Initialized", LAUNCH).await?;
        lab.fx.wait_healthy("once the profile exists").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// Classic 2 where a user skipped Karpenter's validation (`settings.disableDryRun`, env
/// `DISABLE_DRY_RUN`; K14 `pkg/operator/options/options.go`): Karpenter marks the class validated
/// and launches, and EC2 refuses every fleet with the profile error in its `Errors[]` (as for
/// RunInstances, aws/karpenter-provider-aws #3051), so no NodeClaim ever launches. The verdict is
/// the same: it is judged from the class, not from Karpenter's validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_profile_arn_without_dry_run_fails_every_launch() -> Result<()> {
    let lab = Lab::start_seeded_with(
        "lab-arn-nodry",
        "eu-north-1",
        |settings| settings.disable_dry_run = true,
        |fx| json!({"instanceProfile": fx.profile_arn}),
    )
    .await?;
    let outcome: Result<()> = async {
        let operator = lab.fx.start_operator(None, false).await?;
        lab.workload("web", "500m").await?;
        lab.fx
            .wait_only_failed(
                ConditionType::InstanceProfileReady,
                Reason::InstanceProfileIsArn,
            )
            .await?;
        // What Karpenter does: validated without a dry run, it launches, and every fleet is
        // refused; no claim launches and no instance runs.
        lab.karpenter_condition("ValidationSucceeded", "True")
            .await?;
        karpenter_health_e2e::wait_for("a refused fleet", LAUNCH, || async {
            Ok((profile_refusals(&lab).1 >= 1).then_some(()))
        })
        .await?;
        let (dry_runs, _) = profile_refusals(&lab);
        ensure!(
            dry_runs == 0,
            "Karpenter dry-ran {dry_runs} times with DISABLE_DRY_RUN"
        );
        for claim in lab.node_claims().await? {
            ensure!(
                !karpenter_health_e2e::lab::carries(&claim, "Launched", "True"),
                "a NodeClaim launched with an ARN profile"
            );
        }
        ensure!(
            lab.launched_instances().await?.is_empty(),
            "an instance was launched"
        );
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// Classic 3. aws-auth maps the controller role, not the node role: the kubelet, which
/// authenticates as the node role, is refused. The stand-in's `authenticate` mode decides as EKS
/// does: the instance's role (its launch template's profile, read from moto) as its STS session,
/// mapped through aws-auth by the AWS IAM Authenticator's own code, then the API server's Node
/// authorizer; the test only edits aws-auth, the same mode judges both halves. Karpenter launches
/// the instance and waits for a Node that never comes
/// (`pkg/controllers/nodeclaim/lifecycle/registration.go`; it deletes the NodeClaim after 15
/// minutes, `liveness.go`). The same kubelet is then kept out by each other way aws-auth goes
/// wrong (`aws_auth_faults`), each verdict beside the authenticator's or the authorizer's refusal,
/// before aws-auth is mended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_way_aws_auth_keeps_the_node_role_out_leaves_launched_nodes_unregistered() -> Result<()>
{
    let lab = Lab::start("lab-auth", "eu-west-2").await?;
    let outcome: Result<()> = async {
        let controller_role = lab.fx.controller_role_arn.clone();
        lab.fx.map_roles(&[&controller_role]).await?;
        let node_role = lab.fx.node_role_arn.clone();
        let walk = aws_auth_faults(&lab)?;
        kept_out_by_aws_auth_until_mended(
            &lab,
            Reason::ControllerRoleMappedInstead,
            &walk,
            &node_role,
        )
        .await
    }
    .await;
    lab.finish(outcome).await
}

/// A way aws-auth keeps the node role out: what `mapRoles` says (`None`: no aws-auth at all), the
/// verdict, and words of the stand-in's refusal (the authenticator's or the API server's).
struct AwsAuthFault {
    map_roles: Option<String>,
    reason: Reason,
    refused: &'static str,
}

/// Every NodeRoleMapped reason of aws-auth mode beyond the controller's role and the IAM path
/// (which have scenarios of their own), as users write them.
fn aws_auth_faults(lab: &Lab) -> Result<Vec<AwsAuthFault>> {
    let node_role = lab.fx.node_role_arn.as_str();
    let entry = |arn: &str, username: &str, groups: &[&str]| {
        serde_yaml::to_string(&[json!({"rolearn": arn, "username": username, "groups": groups})])
    };
    let node_groups = ["system:bootstrappers", "system:nodes"];
    Ok(vec![
        // Another role mapped as a node, the node role nowhere.
        AwsAuthFault {
            map_roles: Some(entry(
                &lab.fx.retired_role_arn,
                NODE_USERNAME,
                &node_groups,
            )?),
            reason: Reason::NodeRoleNotMapped,
            refused: "is not mapped",
        },
        // The authenticator renders {{SessionName}} as the instance id, but the kubelet registers
        // under the private DNS name, and NodeRestriction lets a node make only its own Node.
        AwsAuthFault {
            map_roles: Some(entry(
                node_role,
                "system:node:{{SessionName}}",
                &node_groups,
            )?),
            reason: Reason::NodeRoleMappingWrongUsername,
            refused: "which is not the node",
        },
        // Without system:nodes the Node authorizer has no opinion and RBAC grants nothing.
        AwsAuthFault {
            map_roles: Some(entry(node_role, NODE_USERNAME, &["system:bootstrappers"])?),
            reason: Reason::NodeRoleMappingMissingGroups,
            refused: "the API server refuses",
        },
        // A quote left open: not YAML, so ParseMap keeps no role at all.
        AwsAuthFault {
            map_roles: Some(format!(
                "- rolearn: \"{node_role}\n  username: {NODE_USERNAME}\n  groups: [system:nodes]\n"
            )),
            reason: Reason::AwsAuthMalformed,
            refused: "is not mapped",
        },
        // No ConfigMap: the authenticator's watch resets every mapping on delete.
        AwsAuthFault {
            map_roles: None,
            reason: Reason::AwsAuthMissing,
            refused: "is not mapped",
        },
    ])
}

/// NodeRoleMappedWithPath: the node role has an IAM path and aws-auth maps it by its full ARN.
/// The kubelet's session ARN names the role without its path, and the authenticator compares ARNs
/// as written, so it maps nothing (EKS's troubleshooting guide says to drop the path). The same
/// role mapped without its path lets the same kubelet in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_auth_mapping_the_node_role_with_its_path_leaves_launched_nodes_unregistered()
-> Result<()> {
    let lab = Lab::start("lab-auth-path", "eu-south-1").await?;
    let outcome: Result<()> = async {
        // The class's profile holds a role with an IAM path, which the controller may pass.
        let role = format!("NodeRole-{}", lab.fx.name);
        let with_path = lab
            .fx
            .aws
            .node_role(&role, "/team/", &NODE_POLICIES_PULL_ONLY)
            .await?;
        let without_path = with_path.replacen("role/team/", "role/", 1);
        lab.fx
            .aws
            .put_role_policy(
                &lab.fx.controller_role,
                CONTROLLER_POLICY,
                &controller_policy(&lab.fx.cluster, &with_path),
            )
            .await?;
        let profile = format!("Profile-{}", lab.fx.name);
        lab.fx.aws.instance_profile(&profile, Some(&role)).await?;
        lab.fx
            .patch_node_class_spec(json!({"instanceProfile": profile}))
            .await?;
        lab.fx.map_roles(&[&with_path]).await?;
        kept_out_by_aws_auth_until_mended(&lab, Reason::NodeRoleMappedWithPath, &[], &without_path)
            .await
    }
    .await;
    lab.finish(outcome).await
}

/// The two halves of an aws-auth scenario once aws-auth keeps the node role out: the verdict
/// (`reason`, and NodeClaimsNotRegistering past a registration timeout shortened to 20 s),
/// Karpenter keeping the launched NodeClaim unregistered, and the stand-in's refusal in the
/// authenticator's own words; then each fault of `walk` in turn, on the same kubelet; then
/// aws-auth mapping `mended` (by the fixture's usual entry), the same kubelet let in, and every
/// condition True.
async fn kept_out_by_aws_auth_until_mended(
    lab: &Lab,
    reason: Reason,
    walk: &[AwsAuthFault],
    mended: &str,
) -> Result<()> {
    lab.steer_nodes(Some("authenticate")).await?;
    let operator = lab
        .fx
        .start_operator_with(None, |config| {
            // Karpenter's 15-minute registration timeout cannot be waited out on the bed.
            config.evaluation.registration_timeout = Duration::from_secs(20);
        })
        .await?;
    lab.workload("web", "500m").await?;
    let launched = lab.wait_node_claim("Launched", LAUNCH).await?;
    let name = launched.metadata.name.clone().unwrap_or_default();
    let status = lab
        .fx
        .wait_failed(&[
            (ConditionType::NodeRoleMapped, reason),
            (
                ConditionType::NodeClaimsRegistered,
                Reason::NodeClaimsNotRegistering,
            ),
        ])
        .await?;
    let message =
        karpenter_health_e2e::health_status::message(&status, ConditionType::NodeClaimsRegistered)
            .to_owned();
    ensure!(
        message.contains(&name),
        "names the NodeClaim {name}: {message}"
    );
    // What Karpenter does: the instance runs, the NodeClaim waits unregistered.
    let claim = lab
        .node_claims()
        .await?
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(&name))
        .context("Karpenter deleted the NodeClaim before its registration timeout")?;
    let registered = condition(&claim, "Registered");
    ensure!(
        registered.is_some_and(|c| c["status"] != "True"),
        "registered without a Node: {registered:?}"
    );
    // Kept out by the authenticator, for the node role it does not map.
    let instance = karpenter_health_e2e::lab::launched_instance_of(&claim)?;
    let refused = lab.refusals.get();
    let why = refused
        .get(&instance)
        .with_context(|| format!("the stand-in judged no kubelet of {instance}: {refused:?}"))?;
    ensure!(
        why.contains("the authenticator refuses") && why.contains("is not mapped"),
        "kept out for another reason than aws-auth: {why}"
    );
    for fault in walk {
        lab.fx.replace_aws_auth(fault.map_roles.as_deref()).await?;
        lab.fx
            .wait_failed(&[
                (ConditionType::NodeRoleMapped, fault.reason),
                (
                    ConditionType::NodeClaimsRegistered,
                    Reason::NodeClaimsNotRegistering,
                ),
            ])
            .await?;
        // The stand-in judges every waiting kubelet again every few seconds.
        let what = format!("{instance} kept out by {}", fault.reason);
        karpenter_health_e2e::wait_for(&what, JUDGED_AGAIN, || async {
            Ok(lab
                .refusals
                .get()
                .get(&instance)
                .is_some_and(|why| why.contains(fault.refused))
                .then_some(()))
        })
        .await
        .with_context(|| {
            format!(
                "the stand-in's last word: {:?}",
                lab.refusals.get().get(&instance)
            )
        })?;
    }

    // The healthy twin: aws-auth mended; the same authenticator lets the kubelet in.
    lab.fx.map_roles(&[mended]).await?;
    lab.wait_node_claim("Initialized", LAUNCH).await?;
    ensure!(
        !lab.refusals.get().contains_key(&instance),
        "the instance joined while the stand-in refused it"
    );
    lab.fx
        .wait_healthy("once aws-auth maps the node role as the authenticator matches it")
        .await?;
    operator.stop().await
}

/// Classic 4. Which label keys Karpenter refuses depends on its release: up to 1.8 the
/// `kubernetes.io` domain is restricted (`ignoring pod, label is restricted`, and the v1.8 CRDs
/// refuse the label on a NodePool); from 1.9 only `karpenter.sh`, `karpenter.k8s.aws` and
/// `kubernetes.io/hostname` are (kubernetes-sigs/karpenter `pkg/apis/v1/labels.go`). A Pod that
/// selects `node-role.kubernetes.io/web` is refused and nothing launches on 1.8; on 1.9 and later
/// a NodePool may carry the label and Karpenter launches for the Pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_role_label_is_refused_where_karpenter_restricts_it_and_launched_where_not()
-> Result<()> {
    let lab = Lab::start("lab-labels", "eu-west-3").await?;
    let restricted = karpenter_health_e2e::lab::release_before(&release(), (1, 9, 0));
    let outcome: Result<()> = async {
        let operator = lab.fx.start_operator(None, false).await?;
        lab.fx.wait_healthy("before any Pod").await?;
        if restricted {
            lab.workload_selecting("web", "node-role.kubernetes.io/web", "")
                .await?;
            lab.fx
                .wait_only_failed(ConditionType::LabelsAllowed, Reason::RestrictedLabelDomain)
                .await?;
            // The provisioner's own refusal (core v1.8 `provisioner.go`, a debug line that
            // carries the key after the phrase), not an Event that might come from elsewhere.
            lab.wait_logged(
                "ignoring pod, label is restricted",
                &["web"],
                PROVISIONER_PASS,
            )
            .await?;
            ensure!(lab.node_claims().await?.is_empty(), "Karpenter launched");
            // The twin: the workload asks for a label of the user's own domain instead, which
            // the NodePool carries.
            lab.delete_pod("web").await?;
            lab.label_node_pool("example.com/role", "web").await?;
            lab.workload_selecting("web-team", "example.com/role", "web")
                .await?;
        } else {
            let log = StatusLog::start(&lab.fx.admin, &lab.fx.name);
            lab.label_node_pool("node-role.kubernetes.io/web", "")
                .await?;
            lab.workload_selecting("web", "node-role.kubernetes.io/web", "")
                .await?;
            lab.wait_node_claim("Initialized", LAUNCH).await?;
            lab.fx.wait_healthy("with the Pod's node served").await?;
            for held in log.stop().await {
                ensure!(
                    !condition_is(
                        &held,
                        ConditionType::LabelsAllowed,
                        "False",
                        Reason::RestrictedLabelDomain
                    ),
                    "False while Karpenter {} launched for the Pod",
                    release()
                );
            }
        }
        lab.wait_node_claim("Initialized", LAUNCH).await?;
        lab.fx.wait_healthy("with a label Karpenter takes").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// Classic 5. Karpenter lists as its own every instance tagged with its cluster name and a
/// NodePool and EC2NodeClass (`pkg/providers/instance/instance.go` `List`), and terminates those
/// no NodeClaim claims once 30 s old (`pkg/controllers/nodeclaim/garbagecollection`): another
/// cluster's nodes under the same name are killed. Instances under another name are left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clusters_instances_under_the_same_name_are_terminated_by_karpenter() -> Result<()>
{
    let lab = Lab::start("lab-identity", "eu-central-1").await?;
    let outcome: Result<()> = async {
        let operator = lab.fx.start_operator(None, false).await?;
        lab.fx
            .wait_healthy("before the other cluster launches")
            .await?;
        let (same_name, other_name) = lab.other_clusters_instances().await?;
        let status = lab
            .fx
            .wait_only_failed(
                ConditionType::ClusterIdentityUnique,
                Reason::ClusterNameSharedWithOtherCluster,
            )
            .await?;
        let message = karpenter_health_e2e::health_status::message(
            &status,
            ConditionType::ClusterIdentityUnique,
        )
        .to_owned();
        ensure!(message.contains(&same_name), "names {same_name}: {message}");
        ensure!(
            !message.contains(&other_name),
            "names the other name's {other_name}: {message}"
        );
        // What Karpenter does: it terminates the other cluster's node, and only that one.
        lab.wait_instance_state(
            &same_name,
            &["shutting-down", "terminated"],
            Duration::from_secs(90),
        )
        .await?;
        ensure!(
            lab.instance_state(&other_name).await? == "running",
            "Karpenter terminated an instance of another cluster name"
        );
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// Classic 1, its healthy half: Karpenter 1.7 and later no longer sends `httpProtocolIPv6` in the
/// isolated regions (PR #8404, `pkg/providers/amifamily/resolver.go`). EC2 there refuses the
/// option (the gap proxy answers as EC2 does), so a launch proves it was not sent. Runs on the
/// lab's releases from 1.7 (v1.8.6, v1.14.1); the failing half runs on v1.6.3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_an_isolated_region_karpenter_1_7_and_later_launches_and_the_check_agrees() -> Result<()>
{
    if karpenter_health_e2e::lab::release_before(&release(), (1, 7, 0)) {
        eprintln!(
            "lab: Karpenter {} sends httpProtocolIPv6: its half is in_an_isolated_region_karpenter_before_1_7_launches_nothing",
            release()
        );
        return Ok(());
    }
    // The option set explicitly: Karpenter from 1.7 drops it in these regions whatever the class
    // says (`resolver.go`, httpProtocolUnsupportedRegions).
    let lab = Lab::start_with_class(
        "lab-iso",
        "us-iso-east-1",
        |_| json!({"metadataOptions": {"httpProtocolIPv6": "enabled"}}),
    )
    .await?;
    let outcome: Result<()> = async {
        // The bed refuses the option there as EC2 does, so a launch below proves it was not sent.
        let ec2 = aws_sdk_ec2::Client::new(
            &lab.fx.bed.aws_config_at(&lab.fx.proxy.url(), &lab.fx.region).await?,
        );
        // A launch template with the option is made (as EC2 makes it) and a launch from it is
        // refused (as EC2 refuses it: #5700, #7081).
        let probe = format!("{}-probe", lab.fx.name);
        ec2.create_launch_template()
            .launch_template_name(&probe)
            .launch_template_data(
                aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                    .metadata_options(
                        aws_sdk_ec2::types::LaunchTemplateInstanceMetadataOptionsRequest::builder()
                            .http_protocol_ipv6(
                                aws_sdk_ec2::types::LaunchTemplateInstanceMetadataProtocolIpv6::Enabled,
                            )
                            .build(),
                    )
                    .build(),
            )
            .send()
            .await?;
        let refused = ec2
            .run_instances()
            .launch_template(
                aws_sdk_ec2::types::LaunchTemplateSpecification::builder()
                    .launch_template_name(&probe)
                    .build(),
            )
            .min_count(1)
            .max_count(1)
            .send()
            .await;
        ensure!(
            refused.as_ref().err().and_then(|e| e.as_service_error()).and_then(|e| aws_sdk_ec2::error::ProvideErrorMetadata::code(e)) == Some("UnsupportedOperation"),
            "the bed must refuse a launch with httpProtocolIPv6 in {}: {refused:?}",
            lab.fx.region
        );
        let log = StatusLog::start(&lab.fx.admin, &lab.fx.name);
        let operator = lab.fx.start_operator(None, false).await?;
        lab.workload("web", "500m").await?;
        lab.wait_node_claim("Initialized", LAUNCH).await?;
        let status = lab.fx.wait_healthy("in an isolated region").await?;
        let said = karpenter_health_e2e::health_status::message(&status, ConditionType::MetadataOptionsSupported).to_owned();
        ensure!(said.contains("no longer sends httpProtocolIPv6"), "{said}");
        for held in log.stop().await {
            ensure!(
                !condition_is(&held, ConditionType::MetadataOptionsSupported, "False", Reason::HttpProtocolIPv6UnsupportedInRegion),
                "False while Karpenter launched"
            );
        }
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// Classic 1, its failing half: Karpenter before 1.7 writes `httpProtocolIPv6` into every launch
/// template (`disabled` on an IPv4 cluster; v1.6.3 `pkg/providers/amifamily/resolver.go`); in the
/// isolated regions EC2 makes the template and refuses every launch from it (`UnsupportedOperation`
/// in the fleet's errors, aws/karpenter-provider-aws #5700, #7081), so nothing launches. Runs
/// on the lab's release before 1.7 (v1.6.3, which `make test` runs for this test only); there is
/// no healthy twin on that release (every template carries the option): the twin is the 1.7
/// test above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_an_isolated_region_karpenter_before_1_7_launches_nothing() -> Result<()> {
    if !karpenter_health_e2e::lab::release_before(&release(), (1, 7, 0)) {
        eprintln!(
            "lab: Karpenter {} no longer sends httpProtocolIPv6: its half is in_an_isolated_region_karpenter_1_7_and_later_launches_and_the_check_agrees",
            release()
        );
        return Ok(());
    }
    let lab = Lab::start("lab-iso-old", "us-iso-east-1").await?;
    let outcome: Result<()> = async {
        let operator = lab.fx.start_operator(None, false).await?;
        lab.workload("web", "500m").await?;
        lab.fx
            .wait_failed(&[(
                ConditionType::MetadataOptionsSupported,
                Reason::HttpProtocolIPv6UnsupportedInRegion,
            )])
            .await?;
        // What Karpenter does: it makes the launch template with the option, validates (its dry
        // runs are not refused for it), launches, and every fleet is refused (#5700, #7081), in
        // its own log; nothing launches. v1.6.3 in an isolated region was seen taking more than
        // LAUNCH to its first launch while five beds shared 2 cores (17 s alone): a bound only.
        let refused = lab
            .wait_logged("", &["HttpProtocol Metadata Options"], LAUNCH * 2)
            .await?;
        eprintln!("lab: Karpenter's launch: {refused}");
        let fleets = lab.fx.proxy.fleets_refused("UnsupportedOperation");
        ensure!(fleets >= 1, "no fleet was refused for the option");
        for claim in lab.node_claims().await? {
            ensure!(
                !karpenter_health_e2e::lab::carries(&claim, "Launched", "True"),
                "a NodeClaim launched with httpProtocolIPv6 in an isolated region"
            );
        }
        ensure!(
            lab.launched_instances().await?.is_empty(),
            "an instance was launched"
        );
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}
