//! The bind page: the templates a binder may bind, each with its
//! description, resources and permission claims, and a Bind button; once
//! one is picked, the bind's progress as the CLI reports it, and any error
//! in plain words. Pure HTML rendering; the page needs no script to pick,
//! and polls the session's state with a few lines of script to show progress.

use super::wire::{Offer, SessionState};
use crate::api::claims::{ClaimOwner, ClaimSelector, PermissionClaim};

/// What a session page says when its session is unknown or has expired.
pub const EXPIRED: &str =
    "This bind session is unknown or has expired. Run bindery bind again for a new one.";

/// The page for session `id`.
pub fn render(id: &str, binder: &str, offers: &[Offer], state: &SessionState) -> String {
    let body = match &state.template {
        None => choose(id, offers),
        Some(template) => progress(id, template, state),
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>bindery: bind an API</title>{STYLE}</head><body>\
         <header><h1>Bind an API</h1><p class=\"who\">Signed in as <b>{}</b></p></header>\
         <main>{body}</main></body></html>\n",
        escape(binder)
    )
}

/// A page that only says what went wrong, with the HTTP status given.
pub fn problem(message: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>bindery: bind an API</title>{STYLE}</head><body>\
         <header><h1>Bind an API</h1></header><main>\
         <p class=\"error\" role=\"alert\" id=\"error\">{}</p></main></body></html>\n",
        escape(message)
    )
}

fn choose(id: &str, offers: &[Offer]) -> String {
    if offers.is_empty() {
        return "<p class=\"error\" role=\"alert\" id=\"error\">There is nothing you may bind: \
                no template grants you the <code>bind</code> verb. Ask the provider's \
                operator for access.</p>"
            .into();
    }
    let mut html =
        String::from("<p>Pick the API to bind into your cluster.</p><ul class=\"offers\">");
    for offer in offers {
        let name = escape(&offer.name);
        html.push_str(&format!(
            "<li class=\"offer\" data-template=\"{name}\"><h2>{name}</h2><p class=\"description\">{}</p>",
            escape(&offer.description)
        ));
        html.push_str("<h3>Resources</h3><ul class=\"resources\">");
        for resource in &offer.resources {
            let versions = if resource.versions.is_empty() {
                "<span class=\"error\">its CRD is missing in the provider</span>".to_string()
            } else {
                escape(&resource.versions.join(", "))
            };
            html.push_str(&format!(
                "<li><code>{}.{}</code> ({}; versions {versions})</li>",
                escape(&resource.resource),
                escape(&resource.group),
                escape(&resource.scope.to_lowercase()),
            ));
        }
        html.push_str("</ul>");
        if offer.claims.is_empty() {
            html.push_str("<p class=\"claims\">No permission claims.</p>");
        } else {
            html.push_str("<h3>Permission claims</h3><ul class=\"claims\">");
            for claim in &offer.claims {
                html.push_str(&format!("<li>{}</li>", escape(&describe_claim(claim))));
            }
            html.push_str("</ul>");
        }
        html.push_str(&format!(
            "<form method=\"post\" action=\"/bind/sessions/{}/choice\">\
             <input type=\"hidden\" name=\"template\" value=\"{name}\">\
             <button type=\"submit\" id=\"bind-{name}\">Bind {name}</button></form></li>",
            escape(id)
        ));
    }
    html.push_str("</ul>");
    html
}

fn progress(id: &str, template: &str, state: &SessionState) -> String {
    let steps: String = state
        .steps
        .iter()
        .map(|s| format!("<li>{}</li>", escape(s)))
        .collect();
    let (class, headline) = match (&state.error, state.done) {
        (Some(error), _) => ("error", format!("Binding failed: {}", escape(error))),
        (None, true) => ("done", format!("{} is bound.", escape(template))),
        (None, false) => (
            "working",
            format!(
                "Binding {}… follow along here or in your terminal.",
                escape(template)
            ),
        ),
    };
    let role = if class == "error" {
        " role=\"alert\""
    } else {
        ""
    };
    format!(
        "<p id=\"result\" class=\"{class}\"{role}>{headline}</p><ol id=\"steps\">{steps}</ol>\
         <script>\n{}\n</script>",
        POLL.replace("SESSION", &escape(id))
    )
}

/// One claim in plain words, e.g. "secrets (core group), owned by the
/// provider, with labels app=db".
pub fn describe_claim(claim: &PermissionClaim) -> String {
    let group = if claim.group.is_empty() {
        "core group".to_string()
    } else {
        claim.group.clone()
    };
    let mut words = format!("{} ({group})", claim.resource);
    let ClaimSelector {
        named_resources,
        namespaces,
        label_selector,
        owner,
        ..
    } = &claim.selector;
    match owner {
        Some(ClaimOwner::Provider) => words.push_str(", owned by the provider"),
        Some(ClaimOwner::Consumer) => words.push_str(", owned by you"),
        None => {}
    }
    if !named_resources.is_empty() {
        let names: Vec<String> = named_resources
            .iter()
            .map(|n| match &n.namespace {
                Some(ns) if !ns.is_empty() => format!("{ns}/{}", n.name),
                _ => n.name.clone(),
            })
            .collect();
        words.push_str(&format!(", named {}", names.join(", ")));
    }
    if !namespaces.is_empty() {
        words.push_str(&format!(", in namespaces {}", namespaces.join(", ")));
    }
    if let Some(labels) = label_selector
        .as_ref()
        .and_then(|s| s.match_labels.as_ref())
        && !labels.is_empty()
    {
        let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        words.push_str(&format!(", with labels {}", pairs.join(",")));
    }
    words
}

/// HTML-escapes text for element content and quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "<style>body{font-family:system-ui,sans-serif;max-width:48rem;margin:2rem auto;\
padding:0 1rem;color:#1d2430}header h1{margin-bottom:0}.who{color:#5a6270;margin-top:.2rem}\
.offers{list-style:none;padding:0}.offer{border:1px solid #d5d9e0;border-radius:8px;padding:1rem;\
margin:1rem 0}.offer h2{margin:0}.offer h3{font-size:1rem;margin:.8rem 0 .2rem}\
button{font-size:1rem;padding:.4rem 1rem;margin-top:.8rem;cursor:pointer}\
.error{color:#a4161a;font-weight:600}.done{color:#1b7a3a;font-weight:600}</style>";

/// Polls the session's state and redraws the result and steps.
const POLL: &str = r#"(function poll() {
  fetch("/bind/sessions/SESSION/state").then(r => r.json()).then(s => {
    const steps = document.getElementById("steps");
    steps.replaceChildren(...s.steps.map(t => { const li = document.createElement("li"); li.textContent = t; return li; }));
    const result = document.getElementById("result");
    if (s.error) { result.className = "error"; result.setAttribute("role", "alert"); result.textContent = "Binding failed: " + s.error; return; }
    if (s.done) { result.className = "done"; result.textContent = s.template + " is bound."; return; }
    setTimeout(poll, 500);
  }).catch(() => setTimeout(poll, 1000));
})();"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::wire::OfferedResource;

    fn offer(name: &str) -> Offer {
        serde_json::from_value(serde_json::json!({
            "name": name, "description": "Managed <PostgreSQL>",
            "resources": [{"group": "db.example.com", "resource": "postgresqlinstances",
                "versions": ["v1", "v1beta1"], "scope": "Namespaced"}],
            "claims": [{"group": "", "resource": "secrets", "selector": {"owner": "Provider",
                "labelSelector": {"matchLabels": {"app": "db"}}}}],
        }))
        .unwrap()
    }

    #[test]
    fn the_choice_shows_description_resources_claims_and_a_button_per_template() {
        let page = render(
            "s1",
            "alice",
            &[offer("postgresql")],
            &SessionState::default(),
        );
        assert!(
            page.contains("Managed &lt;PostgreSQL&gt;"),
            "escaped: {page}"
        );
        assert!(page.contains(
            "<code>postgresqlinstances.db.example.com</code> (namespaced; versions v1, v1beta1)"
        ));
        assert!(page.contains("secrets (core group), owned by the provider, with labels app=db"));
        assert!(page.contains("action=\"/bind/sessions/s1/choice\""));
        assert!(page.contains("id=\"bind-postgresql\""));
        assert!(page.contains("Signed in as <b>alice</b>"));
    }

    #[test]
    fn no_offers_say_why_and_a_missing_crd_is_flagged() {
        let page = render("s1", "bob", &[], &SessionState::default());
        assert!(page.contains("no template grants you the <code>bind</code> verb"));
        let mut broken = offer("broken");
        broken.resources = vec![OfferedResource {
            group: "g".into(),
            resource: "r".into(),
            versions: vec![],
            scope: String::new(),
        }];
        let page = render("s1", "bob", &[broken], &SessionState::default());
        assert!(page.contains("its CRD is missing in the provider"));
    }

    #[test]
    fn progress_shows_steps_then_the_outcome() {
        let mut state = SessionState {
            template: Some("postgresql".into()),
            steps: vec!["request <made>".into()],
            ..Default::default()
        };
        let page = render("s1", "alice", &[], &state);
        assert!(page.contains("Binding postgresql…"));
        assert!(page.contains("<li>request &lt;made&gt;</li>"));
        state.error = Some("the CRD is gone".into());
        let page = render("s1", "alice", &[], &state);
        assert!(page.contains("Binding failed: the CRD is gone"));
        state.error = None;
        state.done = true;
        assert!(render("s1", "alice", &[], &state).contains("postgresql is bound."));
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
