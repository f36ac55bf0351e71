//! `node-stand-in`: the bed's kubelet stand-in as a process (the demo's), for the cluster of
//! `KUBECONFIG`. Does IO.

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let client = kube::Client::try_default().await?;
    eprintln!("node-stand-in: making Nodes for the NodeClaims Karpenter launches");
    // The demo's NodePools do not ask for the `authenticate` mode: no authenticator is given.
    karpenter_health_e2e::node_stand_in::run(client, None, Default::default()).await
}
