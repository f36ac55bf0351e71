//! Names no other test, and no earlier run against the same bed, uses: valid in DNS labels, IAM
//! and EKS names. Reads the clock; no other IO.

use std::time::{SystemTime, UNIX_EPOCH};

/// `prefix`, a dash and a suffix made of this process's id and the clock's nanoseconds.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos:x}", std::process::id())
}
