//! What the lab (the real Karpenter controller on its bed, `e2e/tests/lab/`) says of each
//! reason that can be False: proven in a scenario where the controller is seen doing what the
//! reason's message says, beside its healthy twin, or not proven and why. The vocabulary table
//! gives each condition's entries; docs/checks.md shows them. Pure data, no IO.

/// What the lab says of one reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lab {
    /// Proven by this e2e test (`file::function`).
    Proven(&'static str),
    /// Proven by this e2e test (`file::function`) within a scope docs/checks.md states: which
    /// release proves which half (the lab runs every release `make test` builds), or how much of
    /// Karpenter's behaviour the test observes.
    ProvenWithin(&'static str, &'static str),
    /// Not proven against the real controller, for this reason.
    NotProven(&'static str),
}

impl Lab {
    /// The e2e test that proves the reason (`file::function`), if one does.
    pub fn test(self) -> Option<&'static str> {
        match self {
            Lab::Proven(test) | Lab::ProvenWithin(test, _) => Some(test),
            Lab::NotProven(_) => None,
        }
    }
}

// Why the lab cannot prove a family of reasons, shared by the table's entries.
pub(super) const NO_IAM: &str = "moto enforces no IAM policy and keeps no permissions boundary or SCP, and \
    the lab's Karpenter signs with the bed's shared key, which the gap proxy does not hold to a \
    policy: the real controller is never refused (the proxy can hold a caller to a policy, but maps \
    every EC2 write to resource * without request tags, so only an action missing outright could \
    be shown faithfully, which is not scripted yet). The verdict is proven against IAM's \
    documented evaluation by the gap proxy's simulator (the operator tests' `controller_wiring`) instead.";
pub(super) const KUBELET: &str = "what the instance and its kubelet do with this setup (pull images, \
    run, use their role's permissions) is the node stand-in's to say, not the real kubelet's; the stand-in \
    judges only whether a kubelet is let in through aws-auth (its `authenticate` mode), not through \
    access entries.";
pub(super) const NETWORK: &str = "moto launches instances whatever their subnet's routes, endpoints, DNS or \
    free addresses, and the stand-in makes their Nodes regardless: the failure happens on the \
    node, which the lab does not run.";
pub(super) const KMS: &str = "moto launches instances whose volumes use any key and never terminates them \
    with Client.InternalError; EC2's key checks are not emulated.";
pub(super) const INTERRUPTION: &str = "moto's EventBridge does not deliver EC2's events to the queue, so \
    what Karpenter misses without them cannot be observed; a missing queue is proven instead \
    (InterruptionQueueNotFound).";
pub(super) const SPOT: &str = "moto launches spot capacity without the service-linked role; EC2's refusal \
    and Karpenter's fallback to on-demand are not emulated.";
pub(super) const VERSIONS: &str = "the lab runs the CRDs of the release it builds on one Kubernetes version; \
    older CRDs, stored versions and webhooks of earlier releases are not reproduced.";
pub(super) const STATUS_TIMING: &str = "a contradiction or lag in Karpenter's status needs a controller \
    that misbehaves or stops; the real one in the lab does neither.";
pub(super) const SUMMARY: &str = "a summary of other conditions, not a claim about Karpenter.";
