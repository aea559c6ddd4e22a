//! Percent-decoding of what arrives escaped (path segments, front-proxy
//! header keys), strict as Go's `url.PathUnescape`, which kube-apiserver
//! uses: a `%` not followed by two hex digits, or bytes that are not
//! UTF-8, decode to nothing. The one decoder bindery has, on the
//! `percent-encoding` crate.

use std::borrow::Cow;

/// `text` with its `%XX` escapes decoded; `None` for a bad escape or a
/// result that is not UTF-8. Pure.
pub fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let hex_at = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_hexdigit);
    let well_formed = bytes
        .iter()
        .enumerate()
        .all(|(i, &b)| b != b'%' || (hex_at(i + 1) && hex_at(i + 2)));
    if !well_formed {
        return None;
    }
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(Cow::into_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn escapes_decode_and_bad_ones_decode_to_nothing() {
        assert_eq!(decode("a%2Fb").as_deref(), Some("a/b"));
        assert_eq!(decode("%64efault").as_deref(), Some("default"));
        assert_eq!(decode("plain").as_deref(), Some("plain"));
        for bad in ["bad%zz", "trailing%2", "%", "%%41", "%2%41", "%ff"] {
            assert_eq!(decode(bad), None, "{bad}");
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
