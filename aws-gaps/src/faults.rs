//! Which requests get a fault instead of an answer (the rules tests inject), and the socket
//! handle a reset needs. Pure except [`with_reset_handle`], which duplicates a socket.

use super::{Fault, State, aws_wire::Call, lock};
use std::sync::{Arc, Mutex};
use tokio::net::TcpStream;

#[derive(Clone, Debug)]
pub(super) struct Rule {
    pub(super) service: String,
    /// `None`: every operation of the service.
    pub(super) operation: Option<String>,
    pub(super) fault: Fault,
    /// `None`: until cleared.
    pub(super) remaining: Option<u32>,
    /// Matching requests to let through first.
    pub(super) skip: u32,
}

/// A connection's socket, kept to reset it (a duplicate descriptor of the one hyper owns).
pub(super) type ResetHandle = Arc<Mutex<Option<std::net::TcpStream>>>;

/// Splits off a duplicate of the socket so a handler can later set SO_LINGER 0 on it: the kernel
/// then answers the close with RST, which is what a reset connection looks like to the SDK.
pub(super) fn with_reset_handle(stream: TcpStream) -> std::io::Result<(TcpStream, ResetHandle)> {
    let std_stream = stream.into_std()?;
    let dup = std_stream.try_clone()?;
    Ok((
        TcpStream::from_std(std_stream)?,
        Arc::new(Mutex::new(Some(dup))),
    ))
}

pub(super) fn take_fault(state: &Mutex<State>, call: &Call) -> Option<Fault> {
    let mut state = lock(state);
    let index = state.rules.iter().position(|r| {
        r.service == call.service && r.operation.as_ref().is_none_or(|op| *op == call.operation)
    })?;
    let rule = &mut state.rules[index];
    if rule.skip > 0 {
        rule.skip -= 1;
        return None;
    }
    let fault = rule.fault;
    if let Some(n) = &mut rule.remaining {
        *n = n.saturating_sub(1);
        if *n == 0 {
            state.rules.remove(index);
        }
    }
    Some(fault)
}
