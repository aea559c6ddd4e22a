//! One Table cell, as kube-apiserver's table convertor makes it from what a
//! column's path found: typed by the column (`integer`, `number`,
//! `boolean`, `string`, `date`), `null` when the value is not of that type.
//! A `string` column prints any value as client-go's JSONPath printer does
//! (Go's `fmt.Print` for scalars, `json.Marshal` for maps and lists); a
//! `date` column is the object's age, as `kubectl` shows it. Pure.

use crate::wire::go_number::{go_float, go_json, go_print_number};
use crate::wire::json::go_marshal;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime};

/// A column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellType {
    Integer,
    Number,
    Boolean,
    String,
    Date,
    /// A type kube-apiserver gives no cell for (always `null`).
    Other,
}

impl CellType {
    pub fn of(name: &str) -> Self {
        match name {
            "integer" => CellType::Integer,
            "number" => CellType::Number,
            "boolean" => CellType::Boolean,
            "string" => CellType::String,
            "date" => CellType::Date,
            _ => CellType::Other,
        }
    }
}

/// The cell of a column of type `kind` whose path found `found` (nothing:
/// `None`), at `now`.
pub fn cell(kind: CellType, found: Option<&Value>, now: SystemTime) -> Value {
    let Some(value) = found else {
        return Value::Null;
    };
    if kind == CellType::String {
        return Value::String(printed(value));
    }
    match (kind, value) {
        (CellType::Integer, Value::Number(n)) => match n.as_i64() {
            Some(i) => json!(i),
            // A float64 in Go, converted by `int64(f)`.
            None => json!(go_int64(n.as_f64().unwrap_or(f64::NAN))),
        },
        // `float64(i)` for an int64: rounded as Go rounds it.
        (CellType::Number, Value::Number(n)) => go_float(n.as_f64().unwrap_or(f64::NAN)),
        (CellType::Boolean, Value::Bool(b)) => json!(b),
        (CellType::Date, Value::String(text)) => Value::String(age(text, now)),
        _ => Value::Null,
    }
}

/// Go's `int64(f)` on amd64: truncated toward zero, and the "integer
/// indefinite" value (`math.MinInt64`) where the result does not fit.
fn go_int64(f: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if !(-LIMIT..LIMIT).contains(&f) {
        i64::MIN
    } else {
        f.trunc() as i64
    }
}

/// Whether `value` holds a negative zero, which Go writes `-0` and
/// `serde_json` cannot: such a cell is not rendered here.
pub fn has_negative_zero(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.as_f64().is_some_and(|f| f == 0.0 && f.is_sign_negative()),
        Value::Array(items) => items.iter().any(has_negative_zero),
        Value::Object(map) => map.values().any(has_negative_zero),
        _ => false,
    }
}

/// What client-go's JSONPath printer writes for `value`.
pub fn printed(value: &Value) -> String {
    match value {
        // Found as JSON null: the printer is handed no value.
        Value::Null => "<no value>".into(),
        Value::String(text) => text.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_print_number(n),
        Value::Array(_) | Value::Object(_) => {
            String::from_utf8(go_marshal(&go_json(value))).unwrap_or_default()
        }
    }
}

/// A `date` cell: how long ago `timestamp` (RFC 3339) was, as
/// kube-apiserver's `ConvertToHumanReadableDateType` writes it.
pub fn age(timestamp: &str, now: SystemTime) -> String {
    let Ok(then) =
        time::OffsetDateTime::parse(timestamp, &time::format_description::well_known::Rfc3339)
    else {
        return "<invalid>".into();
    };
    if then.unix_timestamp() == ZERO_TIME {
        return "<unknown>".into();
    }
    let then = SystemTime::UNIX_EPOCH
        .checked_add(Duration::from_secs(then.unix_timestamp().max(0) as u64))
        .and_then(|t| t.checked_add(Duration::from_nanos(u64::from(then.nanosecond()))));
    let Some(then) = then else {
        return "<invalid>".into();
    };
    match now.duration_since(then) {
        Ok(elapsed) => human_duration(elapsed.as_secs_f64()),
        Err(ahead) => human_duration(-ahead.duration().as_secs_f64()),
    }
}

/// `0001-01-01T00:00:00Z`, Go's zero time, in seconds since the epoch.
const ZERO_TIME: i64 = -62_135_596_800;

/// apimachinery's `duration.HumanDuration` of `seconds`.
pub fn human_duration(seconds: f64) -> String {
    // Go truncates toward zero.
    let whole = seconds.trunc() as i64;
    if whole < -1 {
        return "<invalid>".into();
    }
    if whole < 0 {
        return "0s".into();
    }
    if whole < 60 * 2 {
        return format!("{whole}s");
    }
    let minutes = whole / 60;
    if minutes < 10 {
        let s = whole % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = whole / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_typed_by_their_column() {
        let now = SystemTime::now();
        let some = |v: Value| Some(v);
        assert_eq!(
            cell(CellType::Integer, some(json!(3)).as_ref(), now),
            json!(3)
        );
        assert_eq!(
            cell(CellType::Integer, some(json!(3.9)).as_ref(), now),
            json!(3)
        );
        assert_eq!(
            cell(CellType::Integer, some(json!(-3.9)).as_ref(), now),
            json!(-3)
        );
        assert_eq!(
            cell(CellType::Integer, some(json!(1e22)).as_ref(), now),
            json!(i64::MIN)
        );
        assert_eq!(
            cell(CellType::Number, some(json!(i64::MAX)).as_ref(), now).to_string(),
            "9223372036854776000",
            "float64(math.MaxInt64), as Go's encoder writes it"
        );
        assert_eq!(
            cell(CellType::Integer, some(json!("3")).as_ref(), now),
            Value::Null
        );
        assert_eq!(
            cell(CellType::Number, some(json!(2)).as_ref(), now),
            json!(2)
        );
        assert_eq!(
            cell(CellType::Number, some(json!(2.5)).as_ref(), now),
            json!(2.5)
        );
        assert_eq!(
            cell(CellType::Number, some(json!(2.0)).as_ref(), now),
            json!(2)
        );
        assert_eq!(
            cell(CellType::Boolean, some(json!(true)).as_ref(), now),
            json!(true)
        );
        assert_eq!(
            cell(CellType::Boolean, some(json!("true")).as_ref(), now),
            Value::Null
        );
        assert_eq!(
            cell(CellType::Other, some(json!("x")).as_ref(), now),
            Value::Null
        );
        assert_eq!(cell(CellType::String, None, now), Value::Null);
        assert_eq!(
            cell(CellType::Integer, some(Value::Null).as_ref(), now),
            Value::Null
        );
    }

    /// As client-go's JSONPath printer writes them (checked against Go).
    #[test]
    fn string_columns_print_any_value_as_go_does() {
        assert_eq!(printed(&json!("small")), "small");
        assert_eq!(printed(&json!(3)), "3");
        assert_eq!(printed(&json!(1.5)), "1.5");
        assert_eq!(printed(&json!(2.0)), "2");
        assert_eq!(printed(&json!(1e6)), "1e+06");
        assert_eq!(printed(&json!(false)), "false");
        assert_eq!(printed(&Value::Null), "<no value>");
        assert_eq!(
            printed(&json!({"b": 1.0, "a": ["<x>", 2]})),
            r#"{"a":["\u003cx\u003e",2],"b":1}"#
        );
    }

    #[test]
    fn ages_are_written_as_kubectl_shows_them() {
        for (seconds, written) in [
            (-5.0, "<invalid>"),
            (-1.5, "0s"),
            (0.0, "0s"),
            (119.9, "119s"),
            (120.0, "2m"),
            (125.0, "2m5s"),
            (600.0, "10m"),
            (3.0 * 3600.0, "3h"),
            (3.0 * 3600.0 + 60.0, "3h1m"),
            (20.0 * 3600.0, "20h"),
            (50.0 * 3600.0, "2d2h"),
            (10.0 * 86400.0, "10d"),
            (800.0 * 86400.0, "2y70d"),
            (3650.0 * 86400.0, "10y"),
        ] {
            assert_eq!(human_duration(seconds), written, "{seconds}");
        }
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(age("2027-01-15T08:00:00Z", now), "0s"); // 1800000000 is 2027-01-15T08:00:00Z
        assert_eq!(age("2027-01-15T07:55:00Z", now), "5m");
        assert_eq!(age("2027-01-15T08:55:00+01:00", now), "5m");
        assert_eq!(age("0001-01-01T00:00:00Z", now), "<unknown>");
        assert_eq!(age("yesterday", now), "<invalid>");
    }
}
