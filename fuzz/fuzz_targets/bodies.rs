//! Request bodies, each way bindery reads one: an object in JSON, YAML or
//! protobuf (and a protobuf envelope as gogo reads it), every patch type
//! (and JSON and merge patches applied to an object), DeleteOptions, and
//! JSON by Go's scanner. Bad input is a client error, never a panic; the
//! one 5xx is kube-apiserver's own for a DeleteOptions body it cannot
//! decode (a 500 with no reason).

#![no_main]

use arbitrary::Arbitrary;
use bindery::wire::body::{self, Expected, ObjectMedia, PatchType, Rules};
use bindery::wire::query::FieldValidation;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    form: u8,
    validation: u8,
    built_in: bool,
    body: &'a [u8],
    /// The object a patch applies to, as JSON.
    document: &'a [u8],
}

const VALIDATIONS: [FieldValidation; 3] = [
    FieldValidation::Ignore,
    FieldValidation::Warn,
    FieldValidation::Strict,
];

fn client_error<T>(result: Result<T, bindery::status::ApiError>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(error) => {
            assert!(
                (400..500).contains(&error.code),
                "bad input is a client error: {error:?}"
            );
            None
        }
    }
}

fuzz_target!(|input: Input<'_>| {
    let validation = VALIDATIONS[usize::from(input.validation) % VALIDATIONS.len()];
    let rules = if input.built_in {
        Rules::BuiltIn
    } else {
        Rules::CustomResource
    };
    let expected = Expected {
        group: "example.com",
        version: "v1",
        kind: "Widget",
    };
    match input.form % 8 {
        0 => {
            let _ = client_error(body::object(
                ObjectMedia::Json,
                input.body,
                expected,
                validation,
                rules,
            ));
        }
        1 => {
            let _ = client_error(body::object(
                ObjectMedia::Yaml,
                input.body,
                expected,
                validation,
                rules,
            ));
        }
        2 => {
            let _ = client_error(body::object(
                ObjectMedia::Protobuf,
                input.body,
                expected,
                validation,
                rules,
            ));
            let _ = bindery::wire::gogo::unknown(input.body);
            let _ = bindery::wire::protobuf::decode(input.body);
        }
        3 => {
            let _ = client_error(body::patch(PatchType::Apply, input.body, validation));
        }
        4 => {
            let _ = client_error(body::patch(
                PatchType::StrategicMerge,
                input.body,
                validation,
            ));
        }
        5 | 6 => {
            let patch_type = if input.form % 8 == 5 {
                PatchType::Json
            } else {
                PatchType::Merge
            };
            let Some(patch) = client_error(body::patch(patch_type, input.body, validation)) else {
                return;
            };
            let Ok(document) = bindery::deep::from_slice::<serde_json::Value>(input.document)
            else {
                return;
            };
            let _ = match patch_type {
                PatchType::Json => bindery::wire::patch::apply_json_patch(&document, &patch.value),
                _ => bindery::wire::patch::apply_merge_patch(&document, &patch.value),
            };
        }
        _ => {
            let content_type = std::str::from_utf8(input.document).ok();
            if let Err(error) = body::delete_options(content_type, input.body) {
                assert!(
                    (400..500).contains(&error.code)
                        || (error.code == 500 && error.reason.is_empty()),
                    "{error:?}"
                );
            }
            let _ = client_error(body::object_media(content_type));
            let _ = client_error(PatchType::of(content_type, rules));
            let _ = bindery::wire::json::decode(input.body);
            let _ = bindery::wire::json::decode_partial(input.body);
        }
    }
});
