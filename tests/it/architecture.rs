//! docs/architecture.md against the workspace: the crates table is every
//! crate with exactly its `warden-*` dependencies, every path the ownership
//! table names exists, and no crate's top-level modules form a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::common::workspace_root;

const ARCHITECTURE_MD: &str = "docs/architecture.md";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The markdown table whose header row starts with `header`: its rows'
/// cells.
fn table(markdown: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = markdown.lines().skip_while(|line| !line.starts_with(header));
    assert!(
        lines.next().is_some(),
        "no table starting with {header:?} in {ARCHITECTURE_MD}"
    );
    lines
        .skip(1)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().to_string())
                .collect()
        })
        .collect()
}

/// The `warden-*` crates a manifest's `[dependencies]` name, without the
/// prefix (`core`, `task`, …).
fn warden_dependencies(manifest: &str) -> BTreeSet<String> {
    manifest
        .lines()
        .skip_while(|line| line.trim() != "[dependencies]")
        .skip(1)
        .take_while(|line| !line.starts_with('['))
        .filter_map(|line| line.trim().strip_prefix("warden-"))
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_alphanumeric()).next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_crates_table_is_every_crate_with_its_dependencies() {
    let root = workspace_root();
    let rows = table(
        &read(&root.join(ARCHITECTURE_MD)),
        "| crate | role | root (its API) | must not | depends on |",
    );
    let mut documented = BTreeSet::new();
    for row in &rows {
        assert_eq!(row.len(), 5, "a crates row needs five cells: {row:?}");
        let name = row[0].split('`').nth(1).unwrap_or_default().to_string();
        let manifest = if name == "warden" {
            root.join("Cargo.toml")
        } else {
            root.join("crates").join(&name).join("Cargo.toml")
        };
        assert!(
            manifest.is_file(),
            "{ARCHITECTURE_MD} names crate {name}, which has no {}",
            manifest.display()
        );
        let documented_deps: BTreeSet<String> = row[4]
            .split(", ")
            .map(str::trim)
            .filter(|dep| *dep != "—")
            .map(str::to_string)
            .collect();
        assert_eq!(
            documented_deps,
            warden_dependencies(&read(&manifest)),
            "{name}: the 'depends on' cell of {ARCHITECTURE_MD} is not its Cargo.toml's warden-* dependencies"
        );
        documented.insert(name);
    }
    let crates = std::fs::read_dir(root.join("crates")).expect("crates/");
    for entry in crates.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        assert!(
            documented.contains(&name),
            "crate {name} has no row in the crates table of {ARCHITECTURE_MD}"
        );
    }
}

#[test]
fn every_path_the_ownership_table_names_exists() {
    let root = workspace_root();
    let rows = table(&read(&root.join(ARCHITECTURE_MD)), "| concept | owns | path |");
    assert!(rows.len() > 30, "the ownership table lost its rows");
    for row in rows {
        let paths = row.last().cloned().unwrap_or_default();
        for cell in paths.split('`').skip(1).step_by(2) {
            let rooted = ["crates/", "src/", "tests/", "examples/", "scripts/", "docs/"]
                .iter()
                .any(|top| cell.starts_with(top));
            let looks_like_path = rooted && !cell.contains(' ') && !cell.contains('*');
            if looks_like_path {
                assert!(
                    root.join(cell).exists(),
                    "{ARCHITECTURE_MD} names {cell} in the ownership table ({}), which does not exist",
                    row[0]
                );
            }
        }
    }
}

/// Non-test code: a file's text up to its `#[cfg(test)]` module, without
/// comment lines.
fn non_test(source: &str) -> String {
    let code = source.find("#[cfg(test)]").map_or(source, |at| &source[..at]);
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A crate's top-level modules (files and folders under `src/`, by name)
/// and the other top-level modules each one's non-test code names
/// through `crate::x`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut all = Vec::new();
    files(src, &mut all);
    let module_of = |path: &Path| -> Option<String> {
        let relative = path.strip_prefix(src).ok()?;
        let first = relative
            .components()
            .next()?
            .as_os_str()
            .to_string_lossy()
            .to_string();
        let name = first.trim_end_matches(".rs").to_string();
        (name != "lib" && name != "main" && name != "tests").then_some(name)
    };
    for path in &all {
        if let Some(module) = module_of(path) {
            graph.entry(module).or_default();
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for path in &all {
        let Some(module) = module_of(path) else { continue };
        let text = non_test(&read(path));
        for (at, _) in text.match_indices("crate::") {
            let rest = &text[at + "crate::".len()..];
            let named: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if named != module && modules.contains(&named) {
                graph.entry(module.clone()).or_default().insert(named);
            }
        }
        // `use crate::{a, b::c}` names several.
        for (at, _) in text.match_indices("use crate::{") {
            let list = &text[at + "use crate::{".len()..];
            let list = &list[..list.find('}').unwrap_or(0)];
            for item in list.split(',') {
                let named = item.trim().split("::").next().unwrap_or_default().to_string();
                if named != module && modules.contains(&named) {
                    graph.entry(module.clone()).or_default().insert(named);
                }
            }
        }
    }
    graph
}

/// A cycle of `graph`, if it has one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_a_cycle_between_its_top_level_modules() {
    let root = workspace_root();
    let mut sources = vec![root.join("src")];
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/").flatten() {
        sources.push(entry.path().join("src"));
    }
    for src in sources {
        let graph = module_graph(&src);
        assert!(graph.len() > 1, "{}: no modules found", src.display());
        if let Some(found) = cycle(&graph) {
            panic!(
                "{}: its modules form a cycle: {}",
                src.display(),
                found.join(" -> ")
            );
        }
    }
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into();
    assert_eq!(cycle(&graph).map(|c| c.len()), Some(4));
}
