//! What a key may do: the scopes chosen when it is made. A scope is `<area>:read`,
//! `<area>:write` (which includes reading) or `*` (everything); a key made before scopes
//! existed, or made with `*`, is full. Each request needs one scope, found from its path
//! and method ([`needed`]): `GET` reads, every other method writes.

use std::collections::BTreeSet;

/// The areas scopes name, as the first segment of their routes' paths says
/// (`/webhook-endpoints` is `webhooks`, `/settings` is `executions`).
pub const AREAS: [&str; 7] = ["workflows", "executions", "checkpoints", "failures", "billing", "keys", "webhooks"];

/// The scope of every area and access.
pub const FULL: &str = "*";

/// Reading or changing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `GET`.
    Read,
    /// Any other method.
    Write,
}

impl Access {
    fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// One scope a request needs: an area's, or [`FULL`] (a request to `/exports`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needed {
    /// The area.
    pub area: &'static str,
    /// What it does there.
    pub access: Access,
}

impl std::fmt::Display for Needed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.area == FULL {
            return f.write_str(FULL);
        }
        write!(f, "{}:{}", self.area, self.access.as_str())
    }
}

/// The scope a request to `path` (with or without the `/api/v1` prefix) with `method`
/// needs; `None` for a path of no area (answered 404 anyway).
#[must_use]
pub fn needed(method: &http::Method, path: &str) -> Option<Needed> {
    let path = path.strip_prefix("/api/v1").unwrap_or(path);
    let first = path.trim_start_matches('/').split('/').next().unwrap_or_default();
    // `/settings/retention` is the executions' (how long they are kept).
    let access = if method == http::Method::GET || method == http::Method::HEAD { Access::Read } else { Access::Write };
    let first = match first {
        // An export holds every record of the tenant: only a full key may make or read one.
        "exports" => return Some(Needed { area: FULL, access }),
        // Deleting the account revokes every key: only a full key may ask for it.
        "account" => return Some(Needed { area: FULL, access }),
        // The MCP server takes any live key: each of its tools needs its route's scope.
        "mcp" => return None,
        "webhook-endpoints" => "webhooks",
        "settings" => "executions",
        other => other,
    };
    let area = AREAS.into_iter().find(|area| *area == first)?;
    Some(Needed { area, access })
}

/// A key's scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scopes(Option<BTreeSet<String>>);

/// The scopes of the request's key, for a handler that needs them (creating a key).
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Scopes {
    type Rejection = crate::ApiError;

    async fn from_request_parts(parts: &mut http::request::Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Self>()
            .cloned()
            .ok_or_else(|| crate::ApiError::internal("route is served without the authentication layer"))
    }
}

impl Default for Scopes {
    fn default() -> Self {
        Self::full()
    }
}

impl Scopes {
    /// Every area, read and write.
    #[must_use]
    pub fn full() -> Self {
        Self(None)
    }

    /// Scopes as a client names them: each `*` or `<area>:read|write`, at least one.
    ///
    /// # Errors
    /// What is wrong with the list, for a 422.
    pub fn parse<S: AsRef<str>>(list: &[S]) -> Result<Self, String> {
        if list.is_empty() {
            return Err("must name at least one scope (\"*\" for every area)".to_owned());
        }
        let mut scopes = BTreeSet::new();
        for scope in list {
            let scope = scope.as_ref();
            if scope == FULL {
                return Ok(Self::full());
            }
            let valid = scope
                .split_once(':')
                .is_some_and(|(area, access)| AREAS.contains(&area) && (access == "read" || access == "write"));
            if !valid {
                return Err(format!(
                    "unknown scope {scope:?}: each is \"*\" or <area>:read or <area>:write, the areas being {}",
                    AREAS.join(", ")
                ));
            }
            scopes.insert(scope.to_owned());
        }
        Ok(Self(Some(scopes)))
    }

    /// The scopes a key's item holds (none stored: a full key, as every key made before
    /// scopes existed).
    #[must_use]
    pub fn stored(list: Option<&[String]>) -> Self {
        list.map_or_else(Self::full, |list| Self::parse(list).unwrap_or_else(|_| Self(Some(BTreeSet::new()))))
    }

    /// What the key's item holds: nothing for a full key.
    #[must_use]
    pub fn to_stored(&self) -> Option<Vec<String>> {
        self.0.as_ref().map(|set| set.iter().cloned().collect())
    }

    /// The scopes as the API shows them: `["*"]` for a full key.
    #[must_use]
    pub fn to_list(&self) -> Vec<String> {
        self.to_stored().unwrap_or_else(|| vec![FULL.to_owned()])
    }

    /// Whether every area is allowed.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.0.is_none()
    }

    /// Whether a request that needs `needed` is allowed (writing an area includes
    /// reading it).
    #[must_use]
    pub fn allows(&self, needed: Needed) -> bool {
        let Some(set) = &self.0 else { return true };
        set.contains(&format!("{}:write", needed.area))
            || (needed.access == Access::Read && set.contains(&format!("{}:read", needed.area)))
    }

    /// Whether these scopes allow everything `other` does (a key may make only keys it
    /// covers).
    #[must_use]
    pub fn covers(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(_), Some(theirs)) => theirs.iter().all(|scope| {
                let (area, access) = scope.split_once(':').unwrap_or_default();
                let access = if access == "write" { Access::Write } else { Access::Read };
                AREAS.iter().find(|a| **a == area).is_some_and(|area| self.allows(Needed { area, access }))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;

    #[test]
    fn a_request_needs_its_areas_read_or_write_scope() {
        let need = |m: Method, p: &str| needed(&m, p).map(|n| n.to_string());
        assert_eq!(need(Method::GET, "/api/v1/executions/exec_1").as_deref(), Some("executions:read"));
        assert_eq!(need(Method::POST, "/executions/exec_1/replay").as_deref(), Some("executions:write"));
        assert_eq!(need(Method::DELETE, "/api/v1/keys/key_1").as_deref(), Some("keys:write"));
        assert_eq!(need(Method::PATCH, "/api/v1/webhook-endpoints/we_1").as_deref(), Some("webhooks:write"));
        assert_eq!(need(Method::GET, "/api/v1/billing/balance").as_deref(), Some("billing:read"));
        assert_eq!(need(Method::GET, "/api/v1/nowhere"), None);
    }

    #[test]
    fn an_export_needs_a_full_key() {
        let export = needed(&Method::POST, "/api/v1/exports").expect("an area");
        assert_eq!(export.to_string(), "*");
        let everything: Vec<String> = AREAS.iter().flat_map(|a| [format!("{a}:read"), format!("{a}:write")]).collect();
        assert!(!Scopes::parse(&everything).expect("valid").allows(export), "every area's scope is not the full key");
        assert!(Scopes::full().allows(needed(&Method::GET, "/api/v1/exports/export_1/parts/1").expect("an area")));
        assert_eq!(needed(&Method::POST, "/api/v1/account/deletion").expect("an area").to_string(), FULL);
    }

    #[test]
    fn write_includes_read_and_star_is_everything() {
        let scopes = Scopes::parse(&["executions:write", "failures:read"]).expect("valid");
        let allows = |area, access| scopes.allows(Needed { area, access });
        assert!(allows("executions", Access::Read) && allows("executions", Access::Write));
        assert!(allows("failures", Access::Read) && !allows("failures", Access::Write));
        assert!(!allows("keys", Access::Read));
        assert!(Scopes::parse(&["keys:read", "*"]).expect("valid").is_full());
        assert_eq!(Scopes::full().to_list(), ["*"]);
        assert_eq!(scopes.to_list(), ["executions:write", "failures:read"]);
        assert_eq!(Scopes::stored(None), Scopes::full(), "a key made before scopes is full");
    }

    #[test]
    fn a_key_covers_only_what_it_may_do_itself() {
        let mine = Scopes::parse(&["executions:write", "keys:write"]).expect("valid");
        assert!(mine.covers(&Scopes::parse(&["executions:read"]).expect("valid")));
        assert!(mine.covers(&Scopes::parse(&["executions:write", "keys:write"]).expect("valid")));
        assert!(!mine.covers(&Scopes::parse(&["failures:read"]).expect("valid")));
        assert!(!mine.covers(&Scopes::full()));
        assert!(Scopes::full().covers(&mine));
    }

    #[test]
    fn unknown_or_empty_scopes_are_refused() {
        assert!(Scopes::parse::<&str>(&[]).is_err());
        assert!(Scopes::parse(&["executions:admin"]).is_err());
        assert!(Scopes::parse(&["runs:read"]).is_err());
        assert!(Scopes::parse(&["executions"]).is_err());
    }
}
