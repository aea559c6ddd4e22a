//! Free text from the provider (Status messages, warnings, Table cells) in
//! a consumer's terms: no provider namespace, no cluster namespace, no
//! identity selector. Objects are read in `forward::answer`, through the
//! consumer's view (`consumer_view`).

use super::binding::BoundResource;

/// Rewrites free text (error messages): the identity selector bindery added is
/// removed, provider namespaces and prefixed names become consumer ones, and
/// the cluster namespace itself never shows.
pub fn text_up(bound: &BoundResource, text: &str) -> String {
    let selector = bound.identity_selector();
    let mut out = text
        .replace(&format!(",{selector}"), "")
        .replace(&selector, "");
    for (key, value) in bound.identity_labels() {
        out = out.replace(&format!("{key}={value}"), "");
    }
    for (provider, consumer) in bound.namespaces.recorded() {
        out = replace_word(&out, provider, consumer);
    }
    let prefix = format!("{}-", bound.namespaces.cluster_namespace());
    out = strip_prefixed_words(&out, &prefix);
    replace_word(&out, bound.namespaces.cluster_namespace(), "")
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '.'
}

/// Replaces whole-word occurrences of `from` (not inside a longer name).
fn replace_word(text: &str, from: &str, to: &str) -> String {
    if from.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(from) {
        let before_ok = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !is_name_char(c));
        let after = &rest[i + from.len()..];
        let after_ok = after.chars().next().is_none_or(|c| !is_name_char(c));
        out.push_str(&rest[..i]);
        out.push_str(if before_ok && after_ok { to } else { from });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Removes `prefix` where it starts a name: `<cluster-ns>-x` becomes `x`.
fn strip_prefixed_words(text: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let before_ok = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !is_name_char(c));
        out.push_str(&rest[..i]);
        if !before_ok {
            out.push_str(prefix);
        }
        rest = &rest[i + prefix.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::binding::fixtures::widgets;

    #[test]
    fn status_messages_name_consumer_namespaces() {
        let mut w = widgets();
        w.namespaces.insert("team", "provider-team-ns");
        assert_eq!(
            text_up(
                &w,
                "namespaces \"kube-bind-c1-ns\" not found; provider-team-ns; kube-bind-c1"
            ),
            "namespaces \"ns\" not found; team; "
        );
        assert_eq!(text_up(&w, "kube-bind-c1-ns"), "ns");

        let text = format!("unable to parse requirement: x,{}", w.identity_selector());
        assert_eq!(text_up(&w, &text), "unable to parse requirement: x");
    }

    proptest::proptest! {
        #[test]
        fn text_rewriting_never_leaks_the_cluster_namespace(words in proptest::collection::vec("[a-z-]{0,6}", 0..6)) {
            let w = widgets();
            let text = words.join(" kube-bind-c1-");
            let out = text_up(&w, &text);
            proptest::prop_assert!(!out.contains("kube-bind-c1-"), "{out}");
        }
    }
}
