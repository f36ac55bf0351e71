//! `aws-gap-proxy`: the project's AWS proxy as a process of its own, for the runs that use a whole
//! operator rather than a test (`make demo`, the chart test, the image test). In front of moto it
//! answers what moto lacks and every operator reads (EC2 `GetEbsDefaultKmsKeyId`) and forwards the
//! rest unchanged; it injects no faults. Prints its URL as the first line of stdout and runs until
//! it is stopped. Does IO (listens on loopback, forwards to moto).

use anyhow::Result;
use clap::Parser;
use karpenter_health_aws_gaps::FaultProxy;
use std::io::Write;

#[derive(Parser)]
#[command(about = "Serve what moto lacks in front of it; print the URL to give the AWS SDK")]
struct Args {
    /// moto's URL, `http://host:port`.
    #[arg(long)]
    upstream: String,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let proxy = FaultProxy::start(&args.upstream).await?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", proxy.url())?;
    stdout.flush()?;
    tokio::signal::ctrl_c().await?;
    Ok(())
}
