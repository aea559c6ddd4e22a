//! Percent-decoding of what arrives escaped (path segments, front-proxy
//! header keys, query keys and values), strict as Go's `url.PathUnescape`
//! and `url.QueryUnescape`, which kube-apiserver uses: a `%` not followed
//! by two hex digits decodes to nothing, and so does a path or header key
//! whose bytes are not UTF-8. The one decoder bindery has, and the one
//! encoder of path segments, on the `percent-encoding` crate.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use std::borrow::Cow;

/// What a path segment escapes: all but RFC 3986's unreserved characters
/// and the sub-delimiters, `:` and `@` a segment may hold as they are.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b':')
    .remove(b'@')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=');

/// One path segment, percent-encoded. Pure.
pub fn encode_segment(segment: &str) -> String {
    utf8_percent_encode(segment, SEGMENT).to_string()
}

/// `text` with its `%XX` escapes decoded; `None` for a bad escape or a
/// result that is not UTF-8. Pure.
pub fn decode(text: &str) -> Option<String> {
    if !well_formed(text) {
        return None;
    }
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(Cow::into_owned)
}

/// A query key or value decoded as Go's `url.QueryUnescape` does: `+` is a
/// space, `%XX` a byte; `None` for a bad escape. Bytes that are not UTF-8
/// become U+FFFD (kube-apiserver then sees them as Go's strings do). Pure.
pub fn decode_query(text: &str) -> Option<String> {
    if !well_formed(text) {
        return None;
    }
    // Most keys and values hold no `+`: no copy for them.
    let spaced = match text.contains('+') {
        true => Cow::Owned(text.replace('+', " ")),
        false => Cow::Borrowed(text),
    };
    Some(
        percent_encoding::percent_decode_str(&spaced)
            .decode_utf8_lossy()
            .into_owned(),
    )
}

/// Whether every `%` in `text` is followed by two hex digits.
fn well_formed(text: &str) -> bool {
    let bytes = text.as_bytes();
    let hex_at = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_hexdigit);
    bytes
        .iter()
        .enumerate()
        .all(|(i, &b)| b != b'%' || (hex_at(i + 1) && hex_at(i + 2)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_segment_escapes_what_a_segment_cannot_hold() {
        assert_eq!(encode_segment("a/b c%"), "a%2Fb%20c%25");
        assert_eq!(
            encode_segment("x.y-z_~:@!$&'()*+,;="),
            "x.y-z_~:@!$&'()*+,;="
        );
        assert_eq!(encode_segment("é?#"), "%C3%A9%3F%23");
    }

    proptest! {
        #[test]
        fn an_encoded_segment_decodes_to_itself(segment in any::<String>()) {
            let encoded = encode_segment(&segment);
            prop_assert!(!encoded.contains(['/', '?', '#', ' ']));
            prop_assert_eq!(decode(&encoded), Some(segment));
        }
    }

    #[test]
    fn escapes_decode_and_bad_ones_decode_to_nothing() {
        assert_eq!(decode("a%2Fb").as_deref(), Some("a/b"));
        assert_eq!(decode("%64efault").as_deref(), Some("default"));
        assert_eq!(decode("plain").as_deref(), Some("plain"));
        for bad in ["bad%zz", "trailing%2", "%", "%%41", "%2%41", "%ff"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn query_escapes_decode_as_go_decodes_them() {
        assert_eq!(decode_query("a+b%2Bc").as_deref(), Some("a b+c"));
        assert_eq!(decode_query("%ff").as_deref(), Some("\u{fffd}"));
        assert_eq!(decode_query("x%3Dy").as_deref(), Some("x=y"));
        for bad in ["bad%zz", "trailing%2", "%"] {
            assert_eq!(decode_query(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn what_is_escaped_decodes_back(text in "\\PC*") {
            let escaped = percent_encoding::utf8_percent_encode(
                &text,
                percent_encoding::NON_ALPHANUMERIC,
            )
            .to_string();
            prop_assert_eq!(decode(&escaped), Some(text));
        }
    }
}
