//! Kubernetes version ordering (`v1 > v1beta2 > v1beta1 > v1alpha1 > other`),
//! as `k8s.io/apimachinery/pkg/version.CompareKubeAwareVersionStrings`: it
//! orders a group's versions and so picks its preferred version.

use std::cmp::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Alpha,
    Beta,
    Ga,
}

/// `v<major>[(alpha|beta)<minor>]` with ASCII digits that fit an `i64`.
fn parse(v: &str) -> Option<(Stage, i64, i64)> {
    let rest = v.strip_prefix('v')?;
    let major_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if major_len == 0 {
        return None;
    }
    let major = rest[..major_len].parse().ok()?;
    let rest = &rest[major_len..];
    if rest.is_empty() {
        return Some((Stage::Ga, major, 0));
    }
    let (stage, minor) = if let Some(m) = rest.strip_prefix("alpha") {
        (Stage::Alpha, m)
    } else if let Some(m) = rest.strip_prefix("beta") {
        (Stage::Beta, m)
    } else {
        return None;
    };
    if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stage, major, minor.parse().ok()?))
}

/// How `a` compares with `b` in priority: `Greater` means `a` is preferred.
/// Kubernetes-like versions beat the rest; among those GA beats beta beats
/// alpha, then the higher major, then the higher minor. Other strings are
/// preferred in ascending lexical order.
pub fn compare(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    match (parse(a), parse(b)) {
        (None, None) => b.cmp(a),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some((sa, ma, na)), Some((sb, mb, nb))) => sa.cmp(&sb).then(ma.cmp(&mb)).then(na.cmp(&nb)),
    }
}

/// Sorts versions by priority, preferred first.
pub fn sort_by_priority<S: AsRef<str>>(versions: &mut [S]) {
    versions.sort_by(|a, b| compare(b.as_ref(), a.as_ref()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_like_kubernetes() {
        // The example list from the apimachinery documentation, in order.
        let want = [
            "v10",
            "v2",
            "v1",
            "v11beta2",
            "v10beta3",
            "v3beta1",
            "v12alpha1",
            "v11alpha2",
            "foo1",
            "foo10",
        ];
        let mut got: Vec<&str> = want.iter().rev().copied().collect();
        sort_by_priority(&mut got);
        assert_eq!(got, want);
    }

    #[test]
    fn odd_strings_are_not_kube_versions() {
        for v in [
            "v",
            "v1gamma1",
            "v1beta",
            "V1",
            "v1beta1x",
            "v99999999999999999999",
            "vbeta1",
            "v1alpha-1",
            "",
        ] {
            assert_eq!(parse(v), None, "{v}");
            assert_eq!(compare("v1alpha1", v), Ordering::Greater, "{v}");
        }
        assert_eq!(parse("v01"), Some((Stage::Ga, 1, 0)));
        assert_eq!(compare("foo", "foo"), Ordering::Equal);
        assert_eq!(compare("bar", "foo"), Ordering::Greater);
    }
}
