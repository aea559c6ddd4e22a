//! The protobuf envelope (`runtime.Unknown` and its `TypeMeta`) read as
//! the gogo-generated `Unmarshal` of `k8s.io/apimachinery` v0.34.10
//! (`pkg/runtime/generated.pb.go`) reads it, byte for byte: the same
//! varint arithmetic (Go's wrapping `int`), the same order of checks, and
//! the same error words, since kube-apiserver puts them in its 400s. Only
//! what bindery needs of an envelope is kept: its apiVersion and kind.
//! Pure.

/// What an envelope says it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeMeta {
    pub api_version: String,
    pub kind: String,
}

const INTEGER_OVERFLOW: &str = "proto: integer overflow";
const NEGATIVE_LENGTH: &str = "proto: negative length found during unmarshaling";
const UNEXPECTED_EOF: &str = "unexpected EOF";
const END_OF_GROUP: &str = "proto: unexpected end of group";

/// `runtime.Unknown.Unmarshal` of `data` (the bytes after the `k8s\0`
/// prefix): its `TypeMeta`, or the error Go gives.
pub fn unknown(data: &[u8]) -> Result<TypeMeta, String> {
    let mut out = TypeMeta::default();
    message(data, "Unknown", |field, wire_type, reader| match field {
        1 => {
            expect_bytes(wire_type, "TypeMeta")?;
            let bytes = reader.signed_length_bytes()?;
            // Go's generated Unmarshal merges into the embedded struct: a
            // repeated field keeps what the earlier one set.
            merge_type_meta(bytes, &mut out)?;
            Ok(true)
        }
        2 => {
            expect_bytes(wire_type, "Raw")?;
            reader.signed_length_bytes()?;
            Ok(true)
        }
        3 => {
            expect_bytes(wire_type, "ContentEncoding")?;
            reader.string_bytes()?;
            Ok(true)
        }
        4 => {
            expect_bytes(wire_type, "ContentType")?;
            reader.string_bytes()?;
            Ok(true)
        }
        _ => Ok(false),
    })?;
    Ok(out)
}

/// `runtime.TypeMeta.Unmarshal` into `out`, which it does not reset.
fn merge_type_meta(data: &[u8], out: &mut TypeMeta) -> Result<(), String> {
    message(data, "TypeMeta", |field, wire_type, reader| match field {
        1 => {
            expect_bytes(wire_type, "APIVersion")?;
            out.api_version = String::from_utf8_lossy(reader.string_bytes()?).into_owned();
            Ok(true)
        }
        2 => {
            expect_bytes(wire_type, "Kind")?;
            out.kind = String::from_utf8_lossy(reader.string_bytes()?).into_owned();
            Ok(true)
        }
        _ => Ok(false),
    })
}

fn expect_bytes(wire_type: u64, field: &str) -> Result<(), String> {
    if wire_type == 2 {
        Ok(())
    } else {
        Err(format!(
            "proto: wrong wireType = {wire_type} for field {field}"
        ))
    }
}

/// The loop every generated `Unmarshal` runs: a key, then the field's
/// reader (`Ok(false)`: not a known field, skipped as `skipGenerated`
/// skips it).
fn message(
    data: &[u8],
    name: &str,
    mut field: impl FnMut(i32, u64, &mut Reader<'_>) -> Result<bool, String>,
) -> Result<(), String> {
    let mut reader = Reader { data, at: 0 };
    while reader.at < data.len() as i64 {
        let start = reader.at;
        let wire = reader.varint()?;
        // Go's `int32(wire >> 3)`: the low 32 bits, as a signed number.
        let number = (wire >> 3) as u32 as i32;
        let wire_type = wire & 7;
        if wire_type == 4 {
            return Err(format!("proto: {name}: wiretype end group for non-group"));
        }
        if number <= 0 {
            return Err(format!(
                "proto: {name}: illegal tag {number} (wire type {wire})"
            ));
        }
        if !field(number, wire_type, &mut reader)? {
            reader.at = start;
            let rest = &data[start as usize..];
            let skipped = skip(rest)?;
            let end = start.wrapping_add(skipped);
            if skipped < 0 || end < 0 {
                return Err(NEGATIVE_LENGTH.into());
            }
            if end > data.len() as i64 {
                return Err(UNEXPECTED_EOF.into());
            }
            reader.at = end;
        }
    }
    if reader.at > data.len() as i64 {
        return Err(UNEXPECTED_EOF.into());
    }
    Ok(())
}

/// A position in a message, as Go's `iNdEx` (an `int`).
struct Reader<'a> {
    data: &'a [u8],
    at: i64,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = usize::try_from(self.at)
            .ok()
            .and_then(|i| self.data.get(i))
            .copied()
            .ok_or(UNEXPECTED_EOF)?;
        self.at += 1;
        Ok(b)
    }

    /// A key or a `uint64` length.
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            if shift >= 64 {
                return Err(INTEGER_OVERFLOW.into());
            }
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(value);
            }
            shift += 7;
        }
    }

    /// A length read into Go's `int` (`msglen`, `byteLen`).
    fn signed_varint(&mut self) -> Result<i64, String> {
        let mut value = 0i64;
        let mut shift = 0u32;
        loop {
            if shift >= 64 {
                return Err(INTEGER_OVERFLOW.into());
            }
            let b = self.byte()?;
            value |= i64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(value);
            }
            shift += 7;
        }
    }

    fn take(&mut self, length: i64) -> Result<&'a [u8], String> {
        if length < 0 {
            return Err(NEGATIVE_LENGTH.into());
        }
        let end = self.at.wrapping_add(length);
        if end < 0 {
            return Err(NEGATIVE_LENGTH.into());
        }
        if end > self.data.len() as i64 {
            return Err(UNEXPECTED_EOF.into());
        }
        let bytes = &self.data[self.at as usize..end as usize];
        self.at = end;
        Ok(bytes)
    }

    /// An embedded message or `[]byte`: its length as an `int`.
    fn signed_length_bytes(&mut self) -> Result<&'a [u8], String> {
        let length = self.signed_varint()?;
        self.take(length)
    }

    /// A string: its length as a `uint64`, then `int(stringLen)`.
    fn string_bytes(&mut self) -> Result<&'a [u8], String> {
        let length = self.varint()? as i64;
        self.take(length)
    }
}

/// `skipGenerated`: how many bytes the field at the start of `data` takes.
fn skip(data: &[u8]) -> Result<i64, String> {
    let mut reader = Reader { data, at: 0 };
    let mut depth = 0u64;
    while reader.at < data.len() as i64 {
        let wire = reader.varint()?;
        match wire & 7 {
            0 => {
                let mut shift = 0u32;
                loop {
                    if shift >= 64 {
                        return Err(INTEGER_OVERFLOW.into());
                    }
                    if reader.byte()? < 0x80 {
                        break;
                    }
                    shift += 7;
                }
            }
            1 => reader.at = reader.at.wrapping_add(8),
            2 => {
                let length = reader.signed_varint()?;
                if length < 0 {
                    return Err(NEGATIVE_LENGTH.into());
                }
                reader.at = reader.at.wrapping_add(length);
            }
            3 => depth += 1,
            4 => {
                if depth == 0 {
                    return Err(END_OF_GROUP.into());
                }
                depth -= 1;
            }
            5 => reader.at = reader.at.wrapping_add(4),
            other => return Err(format!("proto: illegal wireType {other}")),
        }
        if reader.at < 0 {
            return Err(NEGATIVE_LENGTH.into());
        }
        if depth == 0 {
            return Ok(reader.at);
        }
    }
    Err(UNEXPECTED_EOF.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_envelope_names_its_type() {
        // TypeMeta {apiVersion: v1, kind: Widget}, raw "x", types.
        let data = b"\x0a\x0c\x0a\x02v1\x12\x06Widget\x12\x01x\x1a\x00\x22\x00";
        assert_eq!(
            unknown(data),
            Ok(TypeMeta {
                api_version: "v1".into(),
                kind: "Widget".into()
            })
        );
        assert_eq!(unknown(b""), Ok(TypeMeta::default()));
        // An unknown field is skipped.
        assert_eq!(unknown(b"\x28\x01"), Ok(TypeMeta::default()));
    }

    /// Go's own words for these bytes (runtime.Unknown.Unmarshal of
    /// apimachinery v0.34.10; the oracle test checks many more).
    #[test]
    fn broken_envelopes_are_refused_in_gos_words() {
        for (data, error) in [
            (&b"\x0a"[..], "unexpected EOF"),
            (b"\x0a\x05ab", "unexpected EOF"),
            (b"\x0c", "proto: Unknown: wiretype end group for non-group"),
            (b"\x00", "proto: Unknown: illegal tag 0 (wire type 0)"),
            (b"\x08\x01", "proto: wrong wireType = 0 for field TypeMeta"),
            (
                b"\x0a\x02\x08\x01",
                "proto: wrong wireType = 0 for field APIVersion",
            ),
            (
                b"\x0a\x01\x04",
                "proto: TypeMeta: wiretype end group for non-group",
            ),
            (b"\x2f", "proto: illegal wireType 7"),
            (b"\x2c", "proto: Unknown: wiretype end group for non-group"),
            // A group skipped, then one ended that never began.
            (
                b"\x2b\x2c\x2c",
                "proto: Unknown: wiretype end group for non-group",
            ),
            (
                b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                "proto: negative length found during unmarshaling",
            ),
            (
                b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                "proto: integer overflow",
            ),
        ] {
            assert_eq!(unknown(data), Err(error.to_string()), "{data:?}");
        }
    }

    proptest! {
        #[test]
        fn any_bytes_are_read_or_refused(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = unknown(&data);
        }
    }
}
