//! Tighter numeric, length, item-count and property-count bounds on one field:
//! a lower maximum, a higher minimum, a bound where there was none, or an
//! inclusive bound made exclusive.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;

use super::{Finding, Rule};

/// Pushes one finding for each bound of `new` that rejects values `old` took.
pub(super) fn narrowed(
    old: &JSONSchemaProps,
    new: &JSONSchemaProps,
    path: &str,
    out: &mut Vec<Finding>,
) {
    let counts = [
        ("maxLength", old.max_length, new.max_length, Side::Upper),
        ("minLength", old.min_length, new.min_length, Side::Lower),
        ("maxItems", old.max_items, new.max_items, Side::Upper),
        ("minItems", old.min_items, new.min_items, Side::Lower),
        (
            "maxProperties",
            old.max_properties,
            new.max_properties,
            Side::Upper,
        ),
        (
            "minProperties",
            old.min_properties,
            new.min_properties,
            Side::Lower,
        ),
    ];
    for (keyword, was, now, side) in counts {
        let detail = match (side, was) {
            // No count is below zero: an absent lower bound is a bound of 0.
            (Side::Lower, None) => now
                .filter(|n| *n > 0)
                .map(|n| format!("{keyword} {n} added")),
            _ => tighter(keyword, was, now, side),
        };
        if let Some(detail) = detail {
            out.push(Finding::new(path, Rule::NarrowedBounds, detail));
        }
    }

    let numbers = [
        (
            "maximum",
            old.maximum,
            old.exclusive_maximum,
            new.maximum,
            new.exclusive_maximum,
            Side::Upper,
        ),
        (
            "minimum",
            old.minimum,
            old.exclusive_minimum,
            new.minimum,
            new.exclusive_minimum,
            Side::Lower,
        ),
    ];
    for (keyword, was, was_exclusive, now, now_exclusive, side) in numbers {
        let detail = tighter(keyword, was, now, side).or_else(|| {
            let made_exclusive =
                now_exclusive == Some(true) && was_exclusive != Some(true) && was == now;
            (made_exclusive && now.is_some()).then(|| format!("{keyword} made exclusive"))
        });
        if let Some(detail) = detail {
            out.push(Finding::new(path, Rule::NarrowedBounds, detail));
        }
    }
}

#[derive(Clone, Copy)]
enum Side {
    Upper,
    Lower,
}

/// Why `now` rejects values `was` allowed, if it does. Every comparison with
/// NaN is false, so a NaN bound is reported only when it is new.
fn tighter<T: PartialOrd + std::fmt::Display>(
    keyword: &str,
    was: Option<T>,
    now: Option<T>,
    side: Side,
) -> Option<String> {
    let now = now?;
    let Some(was) = was else {
        return Some(format!("{keyword} {now} added"));
    };
    match side {
        Side::Upper if now < was => Some(format!("{keyword} lowered from {was} to {now}")),
        Side::Lower if now > was => Some(format!("{keyword} raised from {was} to {now}")),
        _ => None,
    }
}
