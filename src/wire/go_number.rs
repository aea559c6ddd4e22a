//! Numbers as Go handles them: as kube-apiserver re-encodes them in OpenAPI
//! and Table cells, and as `fmt` prints them. Schema bounds are Go
//! `float64`s, and JSON values (`default`, `enum`) are decoded keeping
//! integer literals that fit an `int64` and making every other number a
//! `float64`. Go prints a `float64` without a fraction when it has none and is
//! below 1e21 (`1.0` becomes `1`), so this gives the same JSON values.

use serde_json::{Number, Value};

/// A `float64` as Go's encoder writes it.
pub fn go_float(x: f64) -> Value {
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
pub fn go_json(v: &Value) -> Value {
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

/// A `float64` as Go's `fmt.Print` writes it (`%v`: the shortest digits,
/// in exponent form below 1e-4 and from 1e6 on, two exponent digits at
/// least).
pub fn go_print_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, as Go's.
    let exponent_form = format!("{x:e}");
    let (mantissa, exponent) = exponent_form
        .split_once('e')
        .expect("`{:e}` writes an exponent");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    if (-4..6).contains(&exponent) {
        // Display writes the same digits without an exponent.
        return x.to_string();
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// A JSON number as Go's `fmt.Print` writes the value Go decoded it to: an
/// `int64` when it is an integer that fits, else a `float64`.
pub fn go_print_number(n: &serde_json::Number) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        None => go_print_float(n.as_f64().unwrap_or(f64::NAN)),
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
    }

    /// As `fmt.Println` prints them (checked against Go 1.26).
    #[test]
    fn floats_print_as_go_prints_them() {
        for (x, printed) in [
            (1.5, "1.5"),
            (1.0, "1"),
            (100000.0, "100000"),
            (123456.5, "123456.5"),
            (1000000.0, "1e+06"),
            (123456789.0, "1.23456789e+08"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5e-7, "-2.5e-07"),
            (1e21, "1e+21"),
            (1.8446744073709552e19, "1.8446744073709552e+19"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e100, "1e+100"),
        ] {
            assert_eq!(go_print_float(x), printed, "{x}");
        }
        let big: serde_json::Number = serde_json::from_str("18446744073709551615").unwrap();
        assert_eq!(go_print_number(&big), "1.8446744073709552e+19");
        let int: serde_json::Number = serde_json::from_str("-42").unwrap();
        assert_eq!(go_print_number(&int), "-42");
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
