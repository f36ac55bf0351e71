//! Kubernetes quantities as numbers, for the checks that compare requests, limits and room.
//! Pure: no IO.

/// A Kubernetes quantity (`16`, `500m`, `64Gi`, `1.5k`, `1e3`) as a number of units; `None` when
/// it is not one.
pub fn quantity(value: &serde_json::Value) -> Option<f64> {
    let text = match value {
        serde_json::Value::Number(n) => return n.as_f64(),
        serde_json::Value::String(s) => s.trim(),
        _ => return None,
    };
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Pi", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Ei", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (number, scale) = SUFFIXES
        .iter()
        .find_map(|(suffix, scale)| text.strip_suffix(suffix).map(|n| (n, *scale)))
        .unwrap_or((text, 1.0));
    let parsed: f64 = number.parse().ok()?;
    parsed.is_finite().then_some(parsed * scale)
}
