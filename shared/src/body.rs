//! Request bodies: size limit, content type, JSON syntax, then field-by-field
//! validation that reports every problem at once.
//!
//! - over the limit: 413 `payload_too_large` (before any parsing);
//! - not `application/json` or not JSON: 400 `malformed_request`;
//! - not an object, unknown, missing, null where not allowed, wrongly typed or out of
//!   range: 422 `validation_failed` with one entry per field.

use std::collections::BTreeSet;

use axum::extract::{FromRequest, Request};
use http::header;
use serde_json::{Map, Value};

use crate::error::{ApiError, FieldError};

/// Default limit of a request body: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// A route's own body limit, set as a request extension by a layer on that route
/// (for example 6 MiB for `POST /checkpoints`).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

/// The largest body any route accepts, after decoding (`POST /checkpoints`).
pub const MAX_BODY_LIMIT: usize = 6 * 1024 * 1024;

/// Decodes a `Content-Encoding: gzip` request body before anything reads it, so that
/// every limit applies to the decoded body (at most [`MAX_BODY_LIMIT`] here; each route's
/// own limit later). Large states fit Lambda's 6 MB event only compressed. Other
/// encodings are 400 `malformed_request`; a body that is not gzip, 400; one that inflates
/// past the limit, 413 without being inflated further.
pub async fn decode_gzip(request: Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    let Some(encoding) = request.headers().get(header::CONTENT_ENCODING) else {
        return next.run(request).await;
    };
    let encoding = encoding.to_str().unwrap_or_default().trim().to_ascii_lowercase();
    if encoding == "identity" || encoding.is_empty() {
        return next.run(request).await;
    }
    if encoding != "gzip" && encoding != "x-gzip" {
        let message = format!("Content-Encoding {encoding:?} is not supported; send gzip or an unencoded body");
        return ApiError::MalformedRequest(message).into_response();
    }
    let (mut parts, body) = request.into_parts();
    let Ok(compressed) = axum::body::to_bytes(body, MAX_BODY_LIMIT).await else {
        return too_large(MAX_BODY_LIMIT).into_response();
    };
    let mut decoded = Vec::new();
    let inflated = std::io::Read::read_to_end(
        &mut std::io::Read::take(flate2::read::MultiGzDecoder::new(&compressed[..]), MAX_BODY_LIMIT as u64 + 1),
        &mut decoded,
    );
    if inflated.is_err() {
        return ApiError::MalformedRequest("the body is not valid gzip data".to_owned()).into_response();
    }
    if decoded.len() > MAX_BODY_LIMIT {
        return too_large(MAX_BODY_LIMIT).into_response();
    }
    parts.headers.remove(header::CONTENT_ENCODING);
    parts.headers.insert(header::CONTENT_LENGTH, decoded.len().into());
    next.run(Request::from_parts(parts, axum::body::Body::from(decoded))).await
}

/// A JSON request body, read within its limit and parsed, not yet validated.
#[derive(Debug)]
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        read(request, false).await.map(Self)
    }
}

/// A JSON body that may be left out entirely (an empty body reads as `{}`), for actions
/// whose fields are all optional.
#[derive(Debug)]
pub struct OptionalJsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for OptionalJsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        read(request, true).await.map(Self)
    }
}

async fn read(request: Request, allow_empty: bool) -> Result<Value, ApiError> {
    let limit = request.extensions().get::<BodyLimit>().map_or(DEFAULT_BODY_LIMIT, |limit| limit.0);
    let (json, bytes) = read_bytes(request, limit).await?;
    if allow_empty && bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    if !json {
        return Err(not_json());
    }
    parse(&bytes)
}

/// The body within `limit` (413 beyond it, checked before reading when the length is
/// declared), and whether it was sent as JSON.
async fn read_bytes(request: Request, limit: usize) -> Result<(bool, bytes::Bytes), ApiError> {
    let declared =
        request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(too_large(limit));
    }
    let json =
        request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(is_json_media_type);
    let bytes = axum::body::to_bytes(request.into_body(), limit).await.map_err(|_| too_large(limit))?;
    Ok((json, bytes))
}

fn not_json() -> ApiError {
    ApiError::MalformedRequest("the body must be JSON sent with Content-Type: application/json".to_owned())
}

fn too_large(limit: usize) -> ApiError {
    ApiError::PayloadTooLarge(format!("the request body must not exceed {limit} bytes"))
}

fn is_json_media_type(value: &str) -> bool {
    let essence = value.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// A JSON request body read within its limit, as bytes: for a route that keeps one
/// large field as raw JSON ([`split_raw`]) instead of building a tree of it.
#[derive(Debug)]
pub struct RawJsonBody(pub bytes::Bytes);

impl<S: Send + Sync> FromRequest<S> for RawJsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        let limit = request.extensions().get::<BodyLimit>().map_or(DEFAULT_BODY_LIMIT, |limit| limit.0);
        let (json, bytes) = read_bytes(request, limit).await?;
        if !json {
            return Err(not_json());
        }
        Ok(Self(bytes))
    }
}

/// Splits a JSON object body into its field `raw` (kept as the text it was sent as, so a
/// state of millions of values costs its bytes, not a tree of them) and every other
/// field, parsed, for [`Fields`]. The whole body is checked to be JSON first, so syntax
/// errors are 400 as with [`JsonBody`].
///
/// # Errors
/// 400 when the body is not JSON; 422 when it is not an object.
pub fn split_raw<'a>(bytes: &'a [u8], raw: &str) -> Result<(Value, Option<&'a serde_json::value::RawValue>), ApiError> {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(|e| syntax_error(&e))?;
    let fields: Vec<(String, &serde_json::value::RawValue)> = match serde_json::from_slice::<RawFields<'a>>(bytes) {
        Ok(RawFields(fields)) => fields,
        Err(_) => return Err(ApiError::field("body", "must be a JSON object")),
    };
    let mut others = Map::new();
    let mut kept = None;
    for (name, value) in fields {
        if name == raw {
            kept = Some(value);
        } else {
            others.insert(name, parse(value.get().as_bytes())?);
        }
    }
    Ok((Value::Object(others), kept))
}

/// An object's fields in order, values unparsed.
struct RawFields<'a>(Vec<(String, &'a serde_json::value::RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for RawFields<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = RawFields<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de serde_json::value::RawValue>()? {
                    fields.push(entry);
                }
                Ok(RawFields(fields))
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// `raw` as compact JSON (what `serde_json` writes for the value it holds), streamed
/// token by token: no tree of the value is built, so memory stays a small multiple of
/// its size whatever its shape.
///
/// # Errors
/// 400 when it is not valid JSON (it came from a client).
pub fn compact(raw: &serde_json::value::RawValue) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::with_capacity(raw.get().len());
    let mut from = serde_json::Deserializer::from_str(raw.get());
    let mut to = serde_json::Serializer::new(&mut out);
    serde_transcode::transcode(&mut from, &mut to).map_err(|e| syntax_error(&e))?;
    Ok(out)
}

fn syntax_error(e: &serde_json::Error) -> ApiError {
    ApiError::MalformedRequest(format!("the body is not valid JSON (line {}, column {})", e.line(), e.column()))
}

/// Parses JSON text; a syntax error is a 400 naming line and column.
///
/// # Errors
/// [`ApiError::MalformedRequest`] when `bytes` is not one JSON value.
pub fn parse(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| syntax_error(&e))
}

/// A field value read from a body where absence and `null` mean different things
/// (for updates: absent leaves the old value, `null` clears it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Patch<T> {
    /// The field was not sent.
    Absent,
    /// The field was sent as `null`.
    Null,
    /// The field was sent with a valid value.
    Value(T),
}

impl<T> Patch<T> {
    /// Whether the field was sent at all.
    pub fn is_present(&self) -> bool {
        !matches!(self, Self::Absent)
    }

    /// The new value for a nullable field, or `None` when the field was absent.
    pub fn into_update(self) -> Option<Option<T>> {
        match self {
            Self::Absent => None,
            Self::Null => Some(None),
            Self::Value(v) => Some(Some(v)),
        }
    }
}

/// Reads the fields of one JSON object, collecting every problem.
///
/// Each accessor removes its field; [`Fields::finish`] then reports all problems,
/// including every field nobody asked for (unknown fields are refused).
#[derive(Debug)]
pub struct Fields {
    map: Map<String, Value>,
    errors: Vec<FieldError>,
    known: BTreeSet<&'static str>,
}

impl Fields {
    /// Starts reading `body`, which must be a JSON object.
    ///
    /// # Errors
    /// 422 when the body is not an object.
    pub fn new(body: Value) -> Result<Self, ApiError> {
        match body {
            Value::Object(map) => Ok(Self { map, errors: Vec::new(), known: BTreeSet::new() }),
            _ => Err(ApiError::field("body", "must be a JSON object")),
        }
    }

    /// Whether the body had no fields at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The names of the fields the body carries, in order.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }

    /// Records a problem found by the caller (a rule across fields).
    pub fn reject(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError::new(field, message));
    }

    /// Counts `name` as a known field that the caller reads itself (see [`split_raw`]).
    pub fn known(&mut self, name: &'static str) {
        self.known.insert(name);
    }

    fn take(&mut self, name: &'static str) -> Option<Value> {
        self.known.insert(name);
        self.map.remove(name)
    }

    fn check<T>(&mut self, name: &'static str, value: &Value, read: impl Fn(&Value) -> Result<T, String>) -> Option<T> {
        match read(value) {
            Ok(v) => Some(v),
            Err(message) => {
                self.errors.push(FieldError::new(name, message));
                None
            }
        }
    }

    /// A field that must be present and not null.
    pub fn required<T>(&mut self, name: &'static str, read: impl Fn(&Value) -> Result<T, String>) -> Option<T> {
        match self.take(name) {
            None => {
                self.reject(name, "is required");
                None
            }
            Some(Value::Null) => {
                self.reject(name, "must not be null");
                None
            }
            Some(value) => self.check(name, &value, read),
        }
    }

    /// A field that may be absent but, when sent, must not be null.
    pub fn optional<T>(&mut self, name: &'static str, read: impl Fn(&Value) -> Result<T, String>) -> Option<T> {
        match self.take(name)? {
            Value::Null => {
                self.reject(name, "must not be null");
                None
            }
            value => self.check(name, &value, read),
        }
    }

    /// A field that may be absent, null, or a value.
    pub fn nullable<T>(&mut self, name: &'static str, read: impl Fn(&Value) -> Result<T, String>) -> Patch<T> {
        match self.take(name) {
            None => Patch::Absent,
            Some(Value::Null) => Patch::Null,
            Some(value) => self.check(name, &value, read).map_or(Patch::Absent, Patch::Value),
        }
    }

    /// Ends reading: unknown fields and all collected problems become one 422.
    ///
    /// # Errors
    /// [`ApiError::Validation`] listing every problem.
    pub fn finish(mut self) -> Result<(), ApiError> {
        for name in self.map.keys() {
            let message = format!(
                "is not a known field; known fields are {}",
                self.known.iter().copied().collect::<Vec<_>>().join(", ")
            );
            self.errors.push(FieldError::new(name.clone(), message));
        }
        if self.errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(self.errors)) }
    }
}

/// Reads a string of `min..=max` characters (Unicode scalar values).
pub fn text(min: usize, max: usize) -> impl Fn(&Value) -> Result<String, String> {
    move |value| {
        let s = value.as_str().ok_or("must be a string")?;
        let chars = s.chars().count();
        if chars < min {
            return Err(if min == 1 {
                "must not be empty".to_owned()
            } else {
                format!("must be at least {min} characters")
            });
        }
        if chars > max {
            return Err(format!("must be at most {max} characters"));
        }
        if s.chars().any(is_refused_control) {
            return Err("must not contain control characters other than tab, line feed and carriage return".to_owned());
        }
        Ok(s.to_owned())
    }
}

/// The longest client-chosen key (of an execution or a checkpoint).
pub const KEY_MAX_CHARS: usize = 256;

/// Checks a client-chosen key: 1 to [`KEY_MAX_CHARS`] characters, no control characters
/// at all (a key names a thing; it is not text).
///
/// # Errors
/// What is wrong with it.
pub fn check_key(s: &str) -> Result<(), String> {
    if s.is_empty() || s.chars().count() > KEY_MAX_CHARS {
        return Err(format!("must be 1 to {KEY_MAX_CHARS} characters"));
    }
    if s.chars().any(char::is_control) {
        return Err("must not contain control characters".to_owned());
    }
    Ok(())
}

/// Reads a client-chosen key (see [`check_key`]).
///
/// # Errors
/// What is wrong with it.
pub fn client_key(value: &Value) -> Result<String, String> {
    let s = value.as_str().ok_or("must be a string")?;
    check_key(s)?;
    Ok(s.to_owned())
}

/// Control characters have no place in names, messages and metadata, and each costs six
/// bytes in JSON (`\u0001`), which would let one field outgrow the size bounds of a
/// list page; tab, line feed and carriage return are ordinary text.
fn is_refused_control(c: char) -> bool {
    c.is_ascii_control() && !matches!(c, '\t' | '\n' | '\r') && c != '\u{7f}'
}

/// The largest metadata object, serialized as compact JSON: with 50 keys of 40 and values
/// of 500 characters of 4-byte UTF-8, metadata alone could be 108 KB, and a list page of
/// 200 such items over Lambda's 6 MB response limit.
pub const METADATA_MAX_BYTES: usize = 16 * 1024;

/// Reads one of the values of an enum that parses from its wire name.
pub fn one_of<T: WireEnum>(allowed: &'static [T]) -> impl Fn(&Value) -> Result<T, String> {
    move |value| {
        let s = value.as_str().ok_or_else(|| must_be_one_of(allowed))?;
        allowed.iter().copied().find(|v| v.wire() == s).ok_or_else(|| must_be_one_of(allowed))
    }
}

fn must_be_one_of<T: WireEnum>(allowed: &[T]) -> String {
    let names: Vec<&str> = allowed.iter().map(|v| v.wire()).collect();
    format!("must be one of {}", names.join(", "))
}

/// An enum with fixed wire names (`draft`, `published`, …).
pub trait WireEnum: Copy + 'static {
    /// Every value, in documentation order.
    const ALL: &'static [Self];
    /// The value's name on the wire.
    fn wire(self) -> &'static str;
    /// Parses a wire name.
    fn from_wire(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.wire() == s)
    }
}

/// Reads a JSON object whose serialized size is at most `max_bytes`.
pub fn json_object(max_bytes: usize) -> impl Fn(&Value) -> Result<Map<String, Value>, String> {
    move |value| {
        let map = value.as_object().ok_or("must be a JSON object")?;
        let size = serde_json::to_vec(value).map_or(usize::MAX, |v| v.len());
        if size > max_bytes {
            return Err(format!("must be at most {max_bytes} bytes of JSON; it is {size}"));
        }
        Ok(map.clone())
    }
}

/// Reads an object of string values with at most `max_keys` keys (keys 1..=40
/// characters, values at most 500 characters, as Stripe's metadata; no control
/// characters but tab, line feed and carriage return) and at most [`METADATA_MAX_BYTES`]
/// as compact JSON.
pub fn string_map(max_keys: usize) -> impl Fn(&Value) -> Result<std::collections::BTreeMap<String, String>, String> {
    move |value| {
        let map = value.as_object().ok_or("must be an object of string values")?;
        if map.len() > max_keys {
            return Err(format!("must have at most {max_keys} keys"));
        }
        let size = serde_json::to_vec(value).map_or(usize::MAX, |v| v.len());
        if size > METADATA_MAX_BYTES {
            return Err(format!("must be at most {METADATA_MAX_BYTES} bytes as JSON; it is {size}"));
        }
        map.iter()
            .map(|(k, v)| {
                if k.is_empty() || k.chars().count() > 40 {
                    return Err(format!("key {k:?} must be 1 to 40 characters"));
                }
                let s = v.as_str().ok_or_else(|| format!("value of {k:?} must be a string"))?;
                if k.chars().chain(s.chars()).any(is_refused_control) {
                    return Err(format!("key {k:?} or its value contains a control character"));
                }
                if s.chars().count() > 500 {
                    return Err(format!("value of {k:?} must be at most 500 characters"));
                }
                Ok((k.clone(), s.to_owned()))
            })
            .collect()
    }
}

/// Reads an integer in `min..=max` (a JSON number without fraction).
pub fn integer(min: i64, max: i64) -> impl Fn(&Value) -> Result<i64, String> {
    move |value| {
        let n = value
            .as_i64()
            .or_else(|| value.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64))
            .ok_or_else(|| format!("must be an integer from {min} to {max}"))?;
        if (min..=max).contains(&n) { Ok(n) } else { Err(format!("must be an integer from {min} to {max}")) }
    }
}

/// Reads any JSON value (including `null`) of at most `max_bytes` serialized.
pub fn json_value(max_bytes: usize) -> impl Fn(&Value) -> Result<Value, String> {
    move |value| {
        let size = serde_json::to_vec(value).map_or(usize::MAX, |v| v.len());
        if size > max_bytes {
            return Err(format!("must be at most {max_bytes} bytes of JSON; it is {size}"));
        }
        Ok(value.clone())
    }
}

/// Reads a boolean.
pub fn boolean(value: &Value) -> Result<bool, String> {
    value.as_bool().ok_or_else(|| "must be true or false".to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Color {
        Red,
        Blue,
    }

    impl WireEnum for Color {
        const ALL: &'static [Self] = &[Self::Red, Self::Blue];
        fn wire(self) -> &'static str {
            match self {
                Self::Red => "red",
                Self::Blue => "blue",
            }
        }
    }

    fn errors(result: Result<(), ApiError>) -> Vec<(String, String)> {
        match result {
            Err(ApiError::Validation(errors)) => errors.into_iter().map(|e| (e.field, e.message)).collect(),
            other => panic!("expected validation errors, got {other:?}"),
        }
    }

    #[test]
    fn reports_every_problem_at_once_including_unknown_fields() {
        let mut f = Fields::new(json!({"name": "", "color": "green", "colour": "red", "size": 3.5})).expect("object");
        assert_eq!(f.required("name", text(1, 10)), None);
        assert_eq!(f.required("color", one_of(Color::ALL)), None);
        assert_eq!(f.optional("size", integer(1, 10)), None);
        assert_eq!(f.required("missing", text(1, 10)), None);
        let found = errors(f.finish());
        assert_eq!(
            found,
            vec![
                ("name".to_owned(), "must not be empty".to_owned()),
                ("color".to_owned(), "must be one of red, blue".to_owned()),
                ("size".to_owned(), "must be an integer from 1 to 10".to_owned()),
                ("missing".to_owned(), "is required".to_owned()),
                ("colour".to_owned(), "is not a known field; known fields are color, missing, name, size".to_owned()),
            ]
        );
    }

    #[test]
    fn nullable_distinguishes_absent_null_and_value() {
        let mut f = Fields::new(json!({"a": null, "b": "x"})).expect("object");
        assert_eq!(f.nullable("a", text(0, 5)), Patch::Null);
        assert_eq!(f.nullable("b", text(0, 5)), Patch::Value("x".to_owned()));
        assert_eq!(f.nullable("c", text(0, 5)), Patch::Absent);
        assert!(f.finish().is_ok());
    }

    #[test]
    fn optional_and_required_refuse_null() {
        let mut f = Fields::new(json!({"a": null, "b": null})).expect("object");
        assert_eq!(f.optional("a", boolean), None);
        assert_eq!(f.required("b", boolean), None);
        assert_eq!(errors(f.finish()).len(), 2);
    }

    #[test]
    fn non_object_bodies_are_422_and_bad_json_is_400() {
        assert!(matches!(Fields::new(json!([1, 2])), Err(ApiError::Validation(_))));
        assert!(matches!(parse(b"{\"a\":"), Err(ApiError::MalformedRequest(_))));
        assert!(matches!(parse(b"\xff\xfe"), Err(ApiError::MalformedRequest(_))));
    }

    #[test]
    fn text_counts_characters_not_bytes_and_refuses_nul() {
        let read = text(1, 3);
        assert_eq!(read(&json!("äöü")), Ok("äöü".to_owned()));
        assert!(read(&json!("äöüx")).is_err());
        assert!(read(&json!("a\u{0}")).is_err());
        assert!(read(&json!(5)).is_err());
    }

    #[test]
    fn string_map_limits_keys_and_value_types() {
        let read = string_map(2);
        assert!(read(&json!({"a": "1", "b": "2"})).is_ok());
        assert!(read(&json!({"a": "1", "b": "2", "c": "3"})).is_err());
        assert!(read(&json!({"a": 1})).is_err());
        assert!(read(&json!("a")).is_err());
    }

    #[test]
    fn json_object_limits_serialized_size() {
        let read = json_object(20);
        assert!(read(&json!({"k": "short"})).is_ok());
        assert!(read(&json!({"k": "this value is far too long"})).is_err());
        assert!(read(&json!([1])).is_err());
    }

    #[test]
    fn media_type_accepts_parameters_and_case() {
        assert!(is_json_media_type("application/json"));
        assert!(is_json_media_type("Application/JSON; charset=utf-8"));
        assert!(!is_json_media_type("application/x-www-form-urlencoded"));
        assert!(!is_json_media_type("text/plain"));
    }
}
