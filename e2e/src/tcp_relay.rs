//! A TCP relay in front of the API server that can stop answering the way a network partition
//! does: once stalled, no byte passes on open connections and new ones are accepted but never
//! served, so a client waits for its own timeouts instead of seeing a refused connection. TLS
//! passes through untouched (the bed's serving certificate names 127.0.0.1, whatever the port).
//! Does IO (listens on loopback, connects to the upstream).

use anyhow::Result;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// A relay on a free loopback port; stops (and drops every connection) when dropped.
#[derive(Debug)]
pub struct TcpRelay {
    addr: SocketAddr,
    stalled: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TcpRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TcpRelay {
    /// Starts relaying to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stalled, watching) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                connections.spawn(relay(client, upstream, watching.clone()));
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(Self {
            addr,
            stalled,
            task,
        })
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// From now on nothing passes, in either direction, until [`TcpRelay::resume`].
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    pub fn resume(&self) {
        self.stalled.send_replace(false);
    }
}

/// Relays one connection; holds it, silent, while the relay is stalled.
async fn relay(client: TcpStream, upstream: SocketAddr, mut stalled: watch::Receiver<bool>) {
    if stalled.wait_for(|stalled| !stalled).await.is_err() {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = pump(&mut client_read, &mut server_write, stalled.clone());
    let down = pump(&mut server_read, &mut client_write, stalled.clone());
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

/// Copies `from` to `to` chunk by chunk, each chunk held until the relay is not stalled.
async fn pump(
    from: &mut (impl tokio::io::AsyncRead + Unpin),
    to: &mut (impl tokio::io::AsyncWrite + Unpin),
    mut stalled: watch::Receiver<bool>,
) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if stalled.wait_for(|stalled| !stalled).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
