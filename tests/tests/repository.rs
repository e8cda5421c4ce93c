//! The repository stands on its own and stays easy to find one's way in: no tracked file
//! names a path outside it, every relative Markdown link leads to a tracked file, the
//! README and ARCHITECTURE.md stay short, and no source file outgrows a reader.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// Every file git tracks, as a path relative to the root.
fn tracked() -> Vec<String> {
    let out = Command::new("git").args(["ls-files", "-z"]).current_dir(root()).output().expect("git ls-files runs");
    assert!(out.status.success(), "git ls-files failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .expect("tracked paths are UTF-8")
        .split('\0')
        .filter(|path| !path.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The tracked files that are text, with their contents.
fn tracked_text() -> Vec<(String, String)> {
    tracked()
        .into_iter()
        .filter_map(|path| Some((path.clone(), std::fs::read_to_string(root().join(&path)).ok()?)))
        .collect()
}

/// `target`, written in the file at `from` (both relative to the root), resolved without
/// touching the file system; `None` when it climbs above the root.
fn resolve(from: &str, target: &str) -> Option<PathBuf> {
    let joined = Path::new(from).parent().unwrap_or(Path::new("")).join(target);
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in joined.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

/// Relative paths in `text` that start by climbing (`../x`, `../../x`): what follows the
/// last `../` must begin with a name, so `$(dirname "$0")/..` is not one.
fn climbing_paths(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(offset) = text[i..].find("../") {
        let start = i + offset;
        // Only the first `../` of a run, and not the tail of a longer word such as `a../`.
        if start > 0 && (bytes[start - 1] == b'.' || bytes[start - 1].is_ascii_alphanumeric()) {
            i = start + 3;
            continue;
        }
        let mut end = start;
        while text[end..].starts_with("../") {
            end += 3;
        }
        let name_end = text[end..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_.-/".contains(c)))
            .map_or(text.len(), |n| end + n);
        if text[end..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            found.push(text[start..name_end].to_owned());
        }
        i = name_end.max(start + 3);
    }
    found
}

/// The targets of the inline links and images of a Markdown text: `[text](target)`.
fn markdown_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find([')', ' ', '\n']).unwrap_or(rest.len());
        links.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    links
}

#[test]
fn no_tracked_file_names_a_path_outside_the_repository() {
    let this = "tests/tests/repository.rs";
    let mut outside = Vec::new();
    for (path, text) in tracked_text() {
        if path == this {
            continue;
        }
        for climbing in climbing_paths(&text) {
            if resolve(&path, &climbing).is_none() {
                outside.push(format!("{path}: {climbing}"));
            }
        }
        // The machine's own folders, which a clone elsewhere does not have.
        for absolute in ["/work/", "/home/", "/Users/"] {
            if text.contains(absolute) {
                outside.push(format!("{path}: {absolute}..."));
            }
        }
    }
    assert!(outside.is_empty(), "paths outside the repository:\n{}", outside.join("\n"));
}

#[test]
fn the_outside_path_check_sees_climbing_paths() {
    // What the test above relies on: a path that climbs out is seen, one that stays in
    // is not, and a script's `$(dirname "$0")/..` is not a path to a name.
    assert_eq!(climbing_paths("see ../shared/seed/x.txt."), ["../shared/seed/x.txt."]);
    assert_eq!(climbing_paths("[a](../../README.md)"), ["../../README.md"]);
    assert!(climbing_paths(r#"cd "$(dirname "$0")/..""#).is_empty());
    assert_eq!(resolve("README.md", "../shared/x"), None);
    assert_eq!(resolve("docs/api.md", "../shared/x"), Some(PathBuf::from("shared/x")));
    assert_eq!(
        resolve("functions/dashboard/src/lib.rs", "../assets/app.js"),
        Some(PathBuf::from("functions/dashboard/assets/app.js"))
    );
}

#[test]
fn every_relative_markdown_link_leads_to_a_tracked_file() {
    let files = tracked();
    let mut known: BTreeSet<PathBuf> = files.iter().map(PathBuf::from).collect();
    // Directories holding tracked files are fine targets too.
    for file in &files {
        known.extend(Path::new(file).ancestors().skip(1).map(Path::to_path_buf));
    }
    let mut broken = Vec::new();
    for (path, text) in tracked_text().into_iter().filter(|(path, _)| path.ends_with(".md")) {
        for link in markdown_links(&text) {
            let target = link.split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !resolve(&path, target).is_some_and(|resolved| known.contains(&resolved)) {
                broken.push(format!("{path}: {link}"));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing in the repository:\n{}", broken.join("\n"));
}

fn lines(relative: &str) -> usize {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}")).lines().count()
}

#[test]
fn the_readme_and_the_architecture_stay_short() {
    assert!(lines("README.md") <= 200, "README.md has {} lines; topics belong in docs/", lines("README.md"));
    assert!(lines("ARCHITECTURE.md") <= 150, "ARCHITECTURE.md has {} lines", lines("ARCHITECTURE.md"));
}

/// A test file: anything under a `tests` or `benches` folder, or named `test_*.py`.
fn is_test(path: &str) -> bool {
    let path = Path::new(path);
    path.components().any(|c| matches!(c.as_os_str().to_str(), Some("tests" | "benches")))
        || path.file_name().and_then(|name| name.to_str()).is_some_and(|name| name.starts_with("test_"))
}

#[test]
fn no_source_file_outgrows_a_reader() {
    let mut long = Vec::new();
    for path in tracked().into_iter().filter(|path| !is_test(path)) {
        let limit = match Path::new(&path).extension().and_then(|e| e.to_str()) {
            Some("rs") => 900,
            Some("py") => 700,
            _ => continue,
        };
        let count = lines(&path);
        if count > limit {
            long.push(format!("{path}: {count} lines (at most {limit})"));
        }
    }
    assert!(long.is_empty(), "source files to split by concern:\n{}", long.join("\n"));
}
