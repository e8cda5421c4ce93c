//! `shared` has no import cycles: its modules' code (not their comments) names other
//! modules as `crate::<module>`, and those references form no cycle. A directory module
//! (`dynamo/`) counts as one module, whichever of its files names another; its own
//! files, which name each other as `super::<file>`, form no cycle among themselves
//! either.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each module (or file) and the modules (or files) it names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The modules of `shared/src` and their files: `x.rs` is module `x`, and every `.rs`
/// file of a directory `x/` is part of module `x`.
fn modules() -> BTreeMap<String, Vec<PathBuf>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules = BTreeMap::new();
    for path in entries(&dir) {
        let name = path.file_stem().and_then(|s| s.to_str()).expect("name").to_owned();
        if path.is_dir() {
            let files: Vec<PathBuf> = entries(&path).into_iter().filter(|file| is_rust(file)).collect();
            modules.insert(name, files);
        } else if is_rust(&path) {
            modules.insert(name, vec![path]);
        }
    }
    modules
}

/// What a directory holds. A module nested two directories deep is not read yet: it
/// fails here rather than go unchecked.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let paths: Vec<PathBuf> = entries.map(|entry| entry.expect("entry").path()).collect();
    let nested = dir.file_name().is_some_and(|name| name != "src") && paths.iter().any(|path| path.is_dir());
    assert!(!nested, "{}: a nested directory module; teach this test to read it", dir.display());
    paths
}

fn is_rust(path: &Path) -> bool {
    path.extension().is_some_and(|extension| extension == "rs")
}

/// The code of a file, its comment lines left out.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The names `code` gives right after `prefix` (`crate::` or `super::`).
fn named_after(code: &str, prefix: &str) -> BTreeSet<String> {
    code.split(prefix)
        .skip(1)
        .map(|rest| rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect::<String>())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Module -> the other modules its files name as `crate::<module>`.
fn module_graph(modules: &BTreeMap<String, Vec<PathBuf>>) -> Graph {
    modules
        .iter()
        .map(|(module, files)| {
            let mut uses: BTreeSet<String> =
                files.iter().flat_map(|file| named_after(&code(file), "crate::")).collect();
            uses.remove(module);
            (module.clone(), uses)
        })
        .collect()
}

/// File -> the other files of directory module `module` it names, as `super::<file>` or
/// `crate::<module>::<file>` (its `mod.rs`, which declares them all, left out).
fn file_graph(module: &str, files: &[PathBuf]) -> Graph {
    let stem = |file: &PathBuf| file.file_stem().and_then(|s| s.to_str()).expect("name").to_owned();
    let siblings: BTreeSet<String> = files.iter().map(stem).filter(|name| name != "mod").collect();
    files
        .iter()
        .filter(|file| siblings.contains(&stem(file)))
        .map(|file| {
            let code = code(file);
            let mut uses = named_after(&code, "super::");
            uses.extend(named_after(&code, &format!("crate::{module}::")));
            uses.retain(|name| siblings.contains(name) && *name != stem(file));
            (stem(file), uses)
        })
        .collect()
}

/// Panics with the first cycle of `graph`.
fn assert_acyclic(what: &str, graph: &Graph) {
    fn visit(what: &str, node: &str, graph: &Graph, path: &mut Vec<String>, done: &mut BTreeSet<String>) {
        if let Some(start) = path.iter().position(|n| n == node) {
            panic!("an import cycle in {what}: {} -> {node}", path[start..].join(" -> "));
        }
        if !done.insert(node.to_owned()) {
            return;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            visit(what, next, graph, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(what, node, graph, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_shared_crate_has_no_import_cycles() {
    let modules = modules();
    let graph = module_graph(&modules);
    assert_acyclic("shared", &graph);
    let uses = |from: &str, to: &str| graph.get(from).is_some_and(|uses| uses.contains(to));
    assert!(uses("http", "auth"), "the graph was read: {graph:?}");
    assert!(uses("dynamo", "metering"), "every file of dynamo/ was read as dynamo: {graph:?}");
}

#[test]
fn the_files_of_a_directory_module_have_no_import_cycles() {
    let modules = modules();
    let directories: Vec<(&String, &Vec<PathBuf>)> =
        modules.iter().filter(|(_, files)| files.iter().any(|file| file.ends_with("mod.rs"))).collect();
    for (module, files) in &directories {
        assert_acyclic(module, &file_graph(module, files));
    }
    let dynamo = modules.get("dynamo").map(|files| file_graph("dynamo", files)).unwrap_or_default();
    let read = dynamo.get("retry").is_some_and(|uses| uses.contains("transaction"));
    assert!(read, "the files of dynamo/ were read: {dynamo:?}");
}

#[test]
fn a_cycle_is_found() {
    let graph: Graph = [("a", "b"), ("b", "c"), ("c", "a")]
        .into_iter()
        .map(|(from, to)| (from.to_owned(), BTreeSet::from([to.to_owned()])))
        .collect();
    let found = std::panic::catch_unwind(|| assert_acyclic("a test", &graph));
    assert!(found.is_err(), "a -> b -> c -> a is a cycle");
}
