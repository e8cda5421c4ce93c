//! The two list shapes of the API: page-numbered (`page`, `page_size`) and
//! offset-based (`limit`, `offset`), with the contract's defaults and bounds
//! (no silent clamping: out of range is 422).

use serde::Serialize;

use crate::query::Query;

/// Largest `page_size`.
pub const MAX_PAGE_SIZE: u32 = 100;
/// Largest `limit`.
pub const MAX_LIMIT: u32 = 200;
/// The most items a page or offset may skip: skipped items are read (as keys), so a
/// request's cost stays bounded whatever the tenant's data. Deeper is 422, naming
/// `starting_after`, which costs the same at any depth.
pub const MAX_SKIP: usize = 10_000;

fn too_deep(query: &mut Query, name: &str, skip: usize) {
    if skip > MAX_SKIP {
        query.reject(
            name,
            format!(
                "skips {skip} items, more than the {MAX_SKIP} a list may skip; page on with \
                 starting_after=<the id of the last item you have>, which costs the same at any depth"
            ),
        );
    }
}

/// The `starting_after` parameter: the id of an item of the list; the answer holds the
/// items after it in the list's order (Stripe's convention). The list parses it as its
/// own kind of id.
pub fn starting_after(query: &mut Query) -> Option<String> {
    query.string("starting_after")
}

/// A request for one page of a page-numbered list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    /// 1-based page number.
    pub page: u32,
    /// Items per page, 1..=100.
    pub page_size: u32,
}

impl PageRequest {
    /// Reads `page` (default 1) and `page_size` (default `default_size`).
    pub fn read(query: &mut Query, default_size: u32) -> Self {
        let page = Self {
            page: query.integer("page", 1, 1, u32::MAX),
            page_size: query.integer("page_size", default_size, 1, MAX_PAGE_SIZE),
        };
        too_deep(query, "page", page.skip());
        page
    }

    /// How many items come before this page.
    #[must_use]
    pub fn skip(&self) -> usize {
        (self.page as usize - 1).saturating_mul(self.page_size as usize)
    }

    /// The response body for this page.
    pub fn respond<T: Serialize>(self, items: Vec<T>, total: u64) -> PageBody<T> {
        PageBody { items, total, page: self.page, page_size: self.page_size }
    }
}

/// `{items, total, page, page_size}`.
#[derive(Debug, Serialize)]
pub struct PageBody<T> {
    /// The page's items.
    pub items: Vec<T>,
    /// Items matching the filters, on all pages.
    pub total: u64,
    /// This page's number.
    pub page: u32,
    /// Items per page.
    pub page_size: u32,
}

/// A request for a window of an offset-based list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetRequest {
    /// Items to return, 1..=200.
    pub limit: u32,
    /// Items to skip.
    pub offset: u32,
}

impl OffsetRequest {
    /// Reads `limit` (default 50) and `offset` (default 0).
    pub fn read(query: &mut Query) -> Self {
        let window =
            Self { limit: query.integer("limit", 50, 1, MAX_LIMIT), offset: query.integer("offset", 0, 0, u32::MAX) };
        too_deep(query, "offset", window.offset as usize);
        window
    }

    /// The response body for this window.
    pub fn respond<T: Serialize>(self, items: Vec<T>, total: u64) -> OffsetBody<T> {
        OffsetBody { items, total, limit: self.limit, offset: self.offset }
    }
}

/// `{items, total, limit, offset}`.
#[derive(Debug, Serialize)]
pub struct OffsetBody<T> {
    /// The window's items.
    pub items: Vec<T>,
    /// Items matching the filters in all.
    pub total: u64,
    /// The limit asked for.
    pub limit: u32,
    /// The offset asked for.
    pub offset: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_defaults_and_skip() {
        let mut q = Query::parse(None);
        let page = PageRequest::read(&mut q, 20);
        assert_eq!(page, PageRequest { page: 1, page_size: 20 });
        assert_eq!(page.skip(), 0);
        assert_eq!(PageRequest { page: 3, page_size: 7 }.skip(), 14);
    }

    #[test]
    fn page_size_over_100_and_limit_over_200_are_refused() {
        let mut q = Query::parse(Some("page_size=101&limit=201&offset=-1"));
        PageRequest::read(&mut q, 20);
        OffsetRequest::read(&mut q);
        let Err(crate::ApiError::Validation(errors)) = q.finish() else { panic!("expected 422") };
        assert_eq!(errors.len(), 3);
    }

    #[test]
    fn skipping_more_than_the_maximum_is_refused_naming_starting_after() {
        let mut q = Query::parse(Some("page=101&page_size=100&offset=10000"));
        assert_eq!(PageRequest::read(&mut q, 20).skip(), 10_000);
        OffsetRequest::read(&mut q);
        assert!(q.finish().is_ok(), "10,000 skipped items are allowed");
        let mut q = Query::parse(Some("page=102&page_size=100&offset=10001"));
        PageRequest::read(&mut q, 20);
        OffsetRequest::read(&mut q);
        let Err(crate::ApiError::Validation(errors)) = q.finish() else { panic!("expected 422") };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["page", "offset"]);
        assert!(errors[0].message.contains("starting_after"), "{}", errors[0].message);
    }

    #[test]
    fn offset_defaults() {
        let mut q = Query::parse(Some(""));
        assert_eq!(OffsetRequest::read(&mut q), OffsetRequest { limit: 50, offset: 0 });
    }
}
