//! Go's `strconv.Quote`, which is what kube-apiserver's messages use to
//! quote caller input (`%q`), exact to the rune: printable runes as they
//! are, by Go's own `IsPrint` tables ([`isprint`]), every other one escaped.
//! Pure.

mod isprint;

/// Go's `strconv.Quote` (what `%q` writes), exact to the rune: printable
/// runes as they are, by Go's own tables.
pub fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if go_is_print(c) => out.push(c),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.IsPrint`.
pub fn go_is_print(c: char) -> bool {
    let r = c as u32;
    if r <= 0xff {
        return (0x20..=0x7e).contains(&r) || ((0xa1..=0xff).contains(&r) && r != 0xad);
    }
    fn in_ranges<T: Copy + Ord>(ranges: &[T], x: T) -> bool {
        let i = ranges.partition_point(|&v| v < x);
        i < ranges.len() && ranges[i & !1] <= x && x <= ranges[i | 1]
    }
    if let Ok(r16) = u16::try_from(r) {
        return in_ranges(isprint::IS_PRINT16, r16)
            && isprint::IS_NOT_PRINT16.binary_search(&r16).is_err();
    }
    if !in_ranges(isprint::IS_PRINT32, r) {
        return false;
    }
    if r >= 0x20000 {
        return true;
    }
    isprint::IS_NOT_PRINT32
        .binary_search(&((r - 0x10000) as u16))
        .is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_strconv_quote() {
        assert_eq!(
            go_quote(
                "a\"b\\c\n\u{1}\u{7f}\u{a0}\u{ad}é\u{200b}\u{feff}\u{e000}\u{1f600}\u{e0001}\u{10ffff}"
            ),
            "\"a\\\"b\\\\c\\n\\x01\\x7f\\u00a0\\u00adé\\u200b\\ufeff\\ue000😀\\U000e0001\\U0010ffff\""
        );
        assert!(go_is_print('\u{1f600}') && go_is_print('ā') && !go_is_print('\u{378}'));
        assert!(go_is_print('\u{20000}') && !go_is_print('\u{1000c}'));
    }
}
