//! Field and label selectors: field selectors naming a namespace or a
//! cluster-scoped name are rewritten into provider terms, and every label
//! selector is narrowed to the export's identity.

use super::binding::BoundResource;
use crate::wire::selector::{self, escape_field_value};

/// The provider label selector: the consumer's, AND the export's identity.
pub fn label_selector(bound: &BoundResource, consumer: Option<&str>) -> String {
    let identity = bound.identity_selector();
    match consumer.map(str::trim) {
        Some(selector) if !selector.is_empty() => format!("{selector},{identity}"),
        _ => identity,
    }
}

/// The provider field selector for a consumer's, read as kube-apiserver
/// reads it ([`selector::parse_field_selector`]: terms in its order, values
/// unescaped, written again escaped, `==` kept). A selector that does not
/// parse is returned unchanged, for the provider to refuse as it would.
pub fn field_selector(bound: &BoundResource, text: &str) -> String {
    let Ok(parsed) = selector::parse_field_selector(text) else {
        return text.to_string();
    };
    parsed
        .terms()
        .iter()
        .map(|term| {
            let value = match term.key.as_str() {
                "metadata.namespace" if bound.namespaced && !term.value.is_empty() => {
                    bound.namespaces.to_provider(&term.value)
                }
                "metadata.name" if !term.value.is_empty() => bound.provider_name(&term.value),
                _ => term.value.clone(),
            };
            format!(
                "{}{}{}",
                term.key,
                term.operator.as_str(),
                escape_field_value(&value)
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::binding::fixtures::{gadgets, widgets};

    #[test]
    fn namespace_and_name_terms_are_mapped() {
        let w = widgets();
        assert_eq!(
            field_selector(&w, "metadata.namespace=ns,spec.size!=big"),
            "metadata.namespace=kube-bind-c1-ns,spec.size!=big"
        );
        assert_eq!(
            field_selector(&w, "metadata.namespace==ns"),
            "metadata.namespace==kube-bind-c1-ns"
        );
        assert_eq!(
            field_selector(&gadgets(), "metadata.name=g"),
            "metadata.name=kube-bind-c1-g"
        );
        assert_eq!(
            field_selector(&w, "metadata.name=a\\,b"),
            "metadata.name=a\\,b"
        );
    }

    #[test]
    fn unparsable_selectors_pass_unchanged() {
        let w = widgets();
        assert_eq!(field_selector(&w, "nonsense"), "nonsense");
        assert_eq!(field_selector(&w, "a=b=c"), "a=b=c");
        assert_eq!(field_selector(&w, ""), "");
    }

    #[test]
    fn label_selectors_are_narrowed_to_the_export() {
        let w = widgets();
        let identity = w.identity_selector();
        assert_eq!(label_selector(&w, None), identity);
        assert_eq!(label_selector(&w, Some(" ")), identity);
        assert_eq!(
            label_selector(&w, Some("a in (x,y)")),
            format!("a in (x,y),{identity}")
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_round_trips_names(value in "[a-z0-9.,=\\\\-]{0,12}") {
            let w = widgets();
            let selector = format!("metadata.name={}", escape_field_value(&value));
            proptest::prop_assert_eq!(field_selector(&w, &selector), selector);
        }

        #[test]
        fn arbitrary_input_never_panics(selector in "\\PC{0,30}") {
            let _ = field_selector(&gadgets(), &selector);
        }
    }
}
