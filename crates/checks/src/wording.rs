//! How messages word lists, moments and durations, the same in every rule. Pure, no IO.

use jiff::SignedDuration;

/// Lists at most `max` items, then "and N more".
pub(crate) fn list_bounded<S: AsRef<str>>(items: &[S], max: usize) -> String {
    let shown: Vec<&str> = items.iter().take(max).map(AsRef::as_ref).collect();
    match items.len().saturating_sub(max) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// A point in time for messages, to the second (`2026-11-22T21:10:05Z`). Messages carry absolute
/// times, never ages: an unchanged finding then keeps its exact message, so the status is not
/// rewritten and no Event fires again on every evaluation.
pub(crate) fn at(t: jiff::Timestamp) -> String {
    format!("{t:.0}")
}

/// A duration for humans: `3d4h`, `2h5m`, `12m`, `40s`.
pub(crate) fn human(d: SignedDuration) -> String {
    let secs = d.as_secs().max(0);
    let (days, hours, mins) = (secs / 86_400, secs % 86_400 / 3_600, secs % 3_600 / 60);
    match (days, hours, mins) {
        (0, 0, 0) => format!("{secs}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, 0) => format!("{h}h"),
        (0, h, m) => format!("{h}h{m}m"),
        (d, 0, _) => format!("{d}d"),
        (d, h, _) => format!("{d}d{h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_a_human_wrote_them() {
        assert_eq!(human(SignedDuration::from_secs(40)), "40s");
        assert_eq!(human(SignedDuration::from_mins(12)), "12m");
        assert_eq!(human(SignedDuration::from_mins(125)), "2h5m");
        assert_eq!(human(SignedDuration::from_hours(76)), "3d4h");
        assert_eq!(human(SignedDuration::from_secs(-5)), "0s");
        let t = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        assert_eq!(at(t), "2027-01-15T08:00:00Z");
    }

    #[test]
    fn long_lists_are_bounded() {
        let items: Vec<String> = (0..8).map(|i| format!("i-{i}")).collect();
        assert_eq!(list_bounded(&items, 3), "i-0, i-1, i-2 and 5 more");
        assert_eq!(list_bounded(&items[..2], 3), "i-0, i-1");
    }
}
