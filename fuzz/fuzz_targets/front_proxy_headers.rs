//! The front proxy's identity headers (`X-Remote-User`, `-Group`,
//! `-Extra-<key>`, percent-encoded keys), as an app cluster's aggregator
//! sends them: read without a panic, and a user read has a name.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|pairs: Vec<(&str, &[u8])>| {
    let mut headers = http::HeaderMap::new();
    for (name, value) in pairs {
        // The fuzzer finds the header names faster with the prefix given.
        let name = match name.strip_prefix('!') {
            Some(rest) => format!("x-remote-extra-{rest}"),
            None => name.to_string(),
        };
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    if let Some(user) = bindery::auth::front_proxy::from_headers(&headers) {
        assert!(!user.name.is_empty(), "a user read has a name: {user:?}");
    }
});
