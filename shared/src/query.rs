//! Query parameters: unknown ones are ignored, known ones are validated and every
//! problem is reported at once as a 422 naming the parameter.

use std::collections::BTreeMap;

use axum::extract::FromRequestParts;
use chrono::{DateTime, Utc};
use http::request::Parts;

use crate::body::WireEnum;
use crate::error::{ApiError, FieldError};

/// The query string of a request, decoded; read it with the typed accessors, then
/// call [`Query::finish`].
#[derive(Debug, Default)]
pub struct Query {
    values: BTreeMap<String, Vec<String>>,
    errors: Vec<FieldError>,
}

impl<S: Send + Sync> FromRequestParts<S> for Query {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        Ok(Self::parse(parts.uri.query()))
    }
}

impl Query {
    /// Decodes a raw query string (`a=1&b=x%20y`).
    #[must_use]
    pub fn parse(raw: Option<&str>) -> Self {
        let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
            values.entry(name.into_owned()).or_default().push(value.into_owned());
        }
        Self { values, errors: Vec::new() }
    }

    /// The single value of `name`; a repeated parameter is an error.
    fn single(&mut self, name: &str) -> Option<String> {
        let values = self.values.get(name)?;
        match values.as_slice() {
            [one] => Some(one.clone()),
            _ => {
                self.errors.push(FieldError::new(name, "must be given at most once"));
                None
            }
        }
    }

    /// Records a problem with parameter `name` found by the caller.
    pub fn reject(&mut self, name: &str, message: String) {
        self.errors.push(FieldError::new(name, message));
    }

    /// An integer in `min..=max`, `default` when absent.
    pub fn integer(&mut self, name: &str, default: u32, min: u32, max: u32) -> u32 {
        let Some(raw) = self.single(name) else { return default };
        match raw.parse::<u32>() {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                self.reject(name, format!("must be an integer from {min} to {max}"));
                default
            }
        }
    }

    /// A boolean (`true` or `false`), `default` when absent.
    pub fn boolean(&mut self, name: &str, default: bool) -> bool {
        match self.single(name).as_deref() {
            None => default,
            Some("true") => true,
            Some("false") => false,
            Some(_) => {
                self.reject(name, "must be true or false".to_owned());
                default
            }
        }
    }

    /// One of an enum's wire names, if given.
    pub fn one_of<T: WireEnum>(&mut self, name: &str) -> Option<T> {
        let raw = self.single(name)?;
        let found = T::from_wire(&raw);
        if found.is_none() {
            let names: Vec<&str> = T::ALL.iter().map(|v| v.wire()).collect();
            self.reject(name, format!("must be one of {}", names.join(", ")));
        }
        found
    }

    /// A free string, if given (not empty).
    pub fn string(&mut self, name: &str) -> Option<String> {
        let raw = self.single(name)?;
        if raw.is_empty() {
            self.reject(name, "must not be empty".to_owned());
            return None;
        }
        Some(raw)
    }

    /// A free string that must be given (not empty).
    pub fn required_string(&mut self, name: &str) -> Option<String> {
        if !self.values.contains_key(name) {
            self.reject(name, "is required".to_owned());
            return None;
        }
        self.string(name)
    }

    /// A client-chosen key, if given (see [`crate::body::check_key`]).
    pub fn key(&mut self, name: &str) -> Option<String> {
        let raw = self.single(name)?;
        match crate::body::check_key(&raw) {
            Ok(()) => Some(raw),
            Err(message) => {
                self.reject(name, message);
                None
            }
        }
    }

    /// The entries of a deepObject parameter, `name[KEY]=VALUE` (OpenAPI's `style:
    /// deepObject`, Stripe's `metadata[KEY]`): each key at most once, keys 1 to 40
    /// characters, values at most 500 (metadata's bounds), at most `max` entries.
    pub fn deep_object(&mut self, name: &str, max: usize) -> BTreeMap<String, String> {
        let prefix = format!("{name}[");
        let found: Vec<(String, Vec<String>)> = self
            .values
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.strip_suffix(']')?.to_owned(), v.clone())))
            .collect();
        let mut entries = BTreeMap::new();
        for (key, values) in found {
            let field = format!("{name}[{key}]");
            match values.as_slice() {
                [value] if (1..=40).contains(&key.chars().count()) && value.chars().count() <= 500 => {
                    entries.insert(key, value.clone());
                }
                [_] => self.reject(&field, "keys must be 1 to 40 characters and values at most 500".to_owned()),
                _ => self.reject(&field, "must be given at most once".to_owned()),
            }
        }
        if entries.len() > max {
            self.reject(name, format!("at most {max} entries"));
        }
        entries
    }

    /// The `key:value` pairs of a repeatable tag filter (`tag=team:search&tag=env:prod`),
    /// each read by [`crate::tags::parse_filter`]; at most [`crate::tags::TAGS_MAX`],
    /// none twice.
    pub fn tags(&mut self, name: &str) -> Vec<(String, String)> {
        let raw = self.values.get(name).cloned().unwrap_or_default();
        let mut found: Vec<(String, String)> = Vec::new();
        for value in raw {
            match crate::tags::parse_filter(&value) {
                Ok(pair) if found.iter().any(|(k, _)| *k == pair.0) => {
                    self.reject(name, format!("tag {:?} is given more than once", pair.0));
                }
                Ok(pair) => found.push(pair),
                Err(message) => self.reject(name, message),
            }
        }
        if found.len() > crate::tags::TAGS_MAX {
            self.reject(name, format!("at most {} tags", crate::tags::TAGS_MAX));
        }
        found
    }

    /// An RFC 3339 timestamp, if given.
    pub fn timestamp(&mut self, name: &str) -> Option<DateTime<Utc>> {
        let raw = self.single(name)?;
        match crate::time::parse(&raw) {
            Ok(t) => Some(t),
            Err(message) => {
                self.reject(name, message);
                None
            }
        }
    }

    /// Ends reading; all problems become one 422.
    ///
    /// # Errors
    /// [`ApiError::Validation`] listing every invalid parameter.
    pub fn finish(self) -> Result<(), ApiError> {
        if self.errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(self.errors)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_and_unknown_parameters_are_ignored() {
        let mut q = Query::parse(Some("utm_source=mail"));
        assert_eq!(q.integer("page", 1, 1, u32::MAX), 1);
        assert!(!q.boolean("include_state", false));
        assert!(q.finish().is_ok());
    }

    #[test]
    fn out_of_range_garbage_and_repeated_values_are_all_reported() {
        let mut q = Query::parse(Some("page=0&page_size=abc&flag=yes&x=1&x=2&at=monday"));
        q.integer("page", 1, 1, u32::MAX);
        q.integer("page_size", 20, 1, 100);
        q.boolean("flag", false);
        q.string("x");
        q.timestamp("at");
        let Err(ApiError::Validation(errors)) = q.finish() else { panic!("expected 422") };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["page", "page_size", "flag", "x", "at"]);
    }

    #[test]
    fn deep_objects_are_read_by_key_and_checked() {
        let mut q = Query::parse(Some("metadata%5Bsource%5D=input&metadata[step]=1&metadata[]=x&metadatax=1"));
        let found = q.deep_object("metadata", 10);
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            [("source".to_owned(), "input".to_owned()), ("step".to_owned(), "1".to_owned())]
        );
        let Err(ApiError::Validation(errors)) = q.finish() else { panic!("expected 422 for the empty key") };
        assert_eq!(errors[0].field, "metadata[]");
        let mut q = Query::parse(Some("metadata[a]=1&metadata[a]=2&key=%07"));
        q.deep_object("metadata", 10);
        q.key("key");
        let Err(ApiError::Validation(errors)) = q.finish() else { panic!("expected 422") };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["metadata[a]", "key"]);
    }

    #[test]
    fn values_are_percent_decoded() {
        let mut q = Query::parse(Some("created_after=2026-11-21T10%3A00%3A00%2B01%3A00"));
        let t = q.timestamp("created_after").expect("parsed");
        assert_eq!(crate::time::format(t), "2026-11-21T09:00:00.000Z");
    }
}
