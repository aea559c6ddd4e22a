//! Numbers as kube-apiserver re-encodes them in OpenAPI. Schema bounds are Go
//! `float64`s, and JSON values (`default`, `enum`) are decoded keeping
//! integer literals that fit an `int64` and making every other number a
//! `float64`. Go prints a `float64` without a fraction when it has none and is
//! below 1e21 (`1.0` becomes `1`), so this gives the same JSON values.

use serde_json::{Number, Value};

/// A `float64` as Go's encoder writes it.
pub(crate) fn go_float(x: f64) -> Value {
    if !x.is_finite() {
        // Go refuses to encode these; JSON has no spelling for them.
        return Value::Null;
    }
    if x.fract() == 0.0 && x.abs() < 1e21 {
        // Display prints the shortest digits that round-trip, without an
        // exponent, as Go does below 1e21.
        let s = x.to_string();
        if let Ok(i) = s.parse::<i64>() {
            return Value::from(i);
        }
        if let Ok(u) = s.parse::<u64>() {
            return Value::from(u);
        }
    }
    Number::from_f64(x)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// A JSON value after Go's decode (integers kept when they fit `int64`) and
/// re-encode.
pub(crate) fn go_json(v: &Value) -> Value {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i),
            None => go_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::Array(a) => Value::Array(a.iter().map(go_json).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), go_json(v))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_like_go() {
        assert_eq!(go_float(0.0), json!(0));
        assert_eq!(go_float(100.0), json!(100));
        assert_eq!(go_float(-3.0), json!(-3));
        assert_eq!(go_float(0.05), json!(0.05));
        assert_eq!(go_float(1e22), json!(1e22));
        assert_eq!(go_float(f64::NAN), Value::Null);
        // Go: 12345678901234567000 (shortest digits, zero-padded).
        let v = go_float(12345678901234567890.0);
        assert_eq!(
            v,
            serde_json::from_str::<Value>("12345678901234567000").unwrap()
        );
    }

    #[test]
    fn values_decode_like_go() {
        assert_eq!(
            go_json(&json!({"a": [1.0, 2, 2.5, "x", null]})),
            json!({"a": [1, 2, 2.5, "x", null]})
        );
        assert_eq!(go_json(&json!(u64::MAX)), go_float(u64::MAX as f64));
    }
}
