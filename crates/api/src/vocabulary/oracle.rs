//! What the oracle (Karpenter's own scheduler and AWS provider, built from a release's Go
//! modules, judging generated clusters: `oracle/`, `make oracle`) says of each reason whose
//! verdict models Karpenter's scheduling: checked against it, or not and why. The vocabulary
//! table gives each condition's entries; docs/checks.md shows them. Pure data, no IO.

/// The Karpenter releases the oracle is built for (`oracle/karpenter/releases`; a test of the
/// oracle crate holds this list to that folder).
pub const ORACLE_RELEASES: [&str; 2] = ["v1.8.6", "v1.14.1"];

/// What the oracle says of one reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oracle {
    /// Every finding of this reason that says Karpenter launches nothing (for a NodePool, or for
    /// the Pods it names, on the NodePools it names) is checked against Karpenter's own code on
    /// generated clusters, at every release of [`ORACLE_RELEASES`].
    Checked,
    /// Not checked against Karpenter's own code, for this reason.
    NotChecked(&'static str),
}

// Why the oracle cannot judge a family of reasons, shared by the table's entries.
pub(super) const NEEDS_KUBELET: &str = "what a node does after it launches (initialize, give Pods \
    addresses) takes a kubelet, a CNI and time, which the oracle does not run; the lab judges it.";
pub(super) const NO_QUOTA: &str = "the oracle's EC2 keeps no vCPU quota; what EC2 refuses at \
    launch is not Karpenter's code.";
pub(super) const API_SERVER: &str = "the rejection is the API server's (the NodePool and NodeClaim \
    CRDs' validation rules), which the oracle's fake client does not run; the oracle checks that \
    every Pod this reason names waits, and the lab proves the rejection on v1.8.6.";
