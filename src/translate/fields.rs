//! Field and label selectors: field selectors naming a namespace or a
//! cluster-scoped name are rewritten into provider terms, and every label
//! selector is narrowed to the export's identity.

use super::binding::BoundResource;

/// The provider label selector: the consumer's, AND the export's identity.
pub fn label_selector(bound: &BoundResource, consumer: Option<&str>) -> String {
    let identity = bound.identity_selector();
    match consumer.map(str::trim) {
        Some(selector) if !selector.is_empty() => format!("{selector},{identity}"),
        _ => identity,
    }
}

/// The provider field selector for a consumer's. A selector that does not
/// parse is returned unchanged, for the provider to refuse as it would.
pub fn field_selector(bound: &BoundResource, selector: &str) -> String {
    let Some(terms) = parse_field_selector(selector) else {
        return selector.to_string();
    };
    terms
        .into_iter()
        .map(|term| {
            let value = match term.key.as_str() {
                "metadata.namespace" if bound.namespaced && !term.value.is_empty() => {
                    bound.namespaces.to_provider(&term.value)
                }
                "metadata.name" if !term.value.is_empty() => bound.provider_name(&term.value),
                _ => term.value,
            };
            format!("{}{}{}", term.key, term.operator, escape(&value))
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[derive(Debug, PartialEq, Eq)]
struct Term {
    key: String,
    operator: &'static str,
    value: String,
}

/// Parses `key=value,key!=value,key==value`, with `\` escaping `\`, `,` and `=`
/// in values, as apimachinery's `fields.ParseSelector` does.
fn parse_field_selector(selector: &str) -> Option<Vec<Term>> {
    if selector.is_empty() {
        return Some(Vec::new());
    }
    split_unescaped_commas(selector)
        .into_iter()
        .map(|raw| {
            let (key, operator, value) = split_term(raw)?;
            Some(Term {
                key: key.to_string(),
                operator,
                value: unescape(value)?,
            })
        })
        .collect()
}

fn split_unescaped_commas(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        for operator in ["!=", "==", "="] {
            if term[i..].starts_with(operator) {
                return Some((&term[..i], operator, &term[i + operator.len()..]));
            }
        }
    }
    None
}

fn unescape(value: &str) -> Option<String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                c @ ('\\' | ',' | '=') => out.push(c),
                _ => return None,
            },
            ',' | '=' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
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
            let selector = format!("metadata.name={}", escape(&value));
            proptest::prop_assert_eq!(field_selector(&w, &selector), selector);
        }

        #[test]
        fn arbitrary_input_never_panics(selector in "\\PC{0,30}") {
            let _ = field_selector(&gadgets(), &selector);
        }
    }
}
