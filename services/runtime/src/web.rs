//! Links into Octant's web view (served by the profiler), shared by the services that print or
//! send them (the alerter's Alertmanager links, the demo).

/// Percent-encodes one path segment (RFC 3986 unreserved characters kept).
pub fn path_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The alert page of `fingerprint` under the web view's external base URL.
pub fn alert_url(base: &str, fingerprint: &str) -> String {
    format!("{}/alerts/{}", base.trim_end_matches('/'), path_segment(fingerprint))
}

/// The run page of `run_id` (at `step`, when given) under the web view's external base URL.
pub fn run_url(base: &str, run_id: &str, step: Option<i64>) -> String {
    format!("{}/runs/{}{}", base.trim_end_matches('/'), path_segment(run_id), step.map(|s| format!("#step-{s}")).unwrap_or_default())
}

/// Checks a configured external base URL.
pub fn check_base_url(name: &str, url: &str) -> Result<(), String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("{name} must be an http:// or https:// URL"));
    }
    if url.contains(['?', '#', ' ']) {
        return Err(format!("{name} must be a base URL without query, fragment or spaces"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_encode_what_they_carry() {
        assert_eq!(
            alert_url("https://octant.example/", "s/1/production/unsafe_action_veto"),
            "https://octant.example/alerts/s%2F1%2Fproduction%2Funsafe_action_veto"
        );
        assert_eq!(run_url("http://h:9105", "run <1>", Some(3)), "http://h:9105/runs/run%20%3C1%3E#step-3");
        assert!(
            check_base_url("x", "ftp://h").is_err()
                && check_base_url("x", "http://h/?a").is_err()
                && check_base_url("x", "https://h/octant").is_ok()
        );
    }
}
