//! The module graph of `src/` has no cycles: neither between top-level
//! modules (`crate::a` using `crate::b` and back) nor between the files of
//! one module (`super::a` using `super::b` and back). Read from the source
//! (paths in code, not in comments; test modules left out), so that a new
//! cycle fails here, where the compiler would not see it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

mod source;
use source::sources;

/// The module path of a file (`cache/store.rs` → `cache::store`,
/// `cache/mod.rs` → `cache`).
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The code of a file without its test modules and comments.
fn code_of(text: &str) -> String {
    let before_tests = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    before_tests
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed.starts_with("//") { "" } else { line }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a file names: `crate::a::b`, `super::a`, `self::a`, and the
/// items of `use crate::{a, b}` / `use super::{a, b}` groups, each made
/// absolute.
fn named_paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let parent = module[..module.len().saturating_sub(1)].to_vec();
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    for (start, _) in code.match_indices("::") {
        // The word before `::`.
        let head_start = code[..start]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let head = &code[head_start..start];
        let base: Vec<String> = match head {
            "crate" => Vec::new(),
            "super" if head_start >= 2 && &code[head_start - 2..head_start] == "::" => continue,
            "super" => parent.clone(),
            "self" => module.to_vec(),
            _ => continue,
        };
        let rest = &code[start + 2..];
        if rest.starts_with('{') {
            let end = rest.find('}').unwrap_or(rest.len());
            for item in rest[1..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    let mut path = base.clone();
                    path.push(name);
                    found.push(path);
                }
            }
            continue;
        }
        let mut path = base;
        let mut at = start + 2;
        loop {
            let word: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if word.is_empty() {
                break;
            }
            at += word.len();
            path.push(word);
            if bytes.get(at..at + 2) == Some(b"::".as_slice()) {
                at += 2;
            } else {
                break;
            }
        }
        found.push(path);
    }
    found
}

/// The longest prefix of `path` that is a module of `modules`.
fn resolve<'a>(modules: &'a BTreeSet<Vec<String>>, path: &[String]) -> Option<&'a Vec<String>> {
    (1..=path.len()).rev().find_map(|n| modules.get(&path[..n]))
}

/// The cycles (strongly connected components of more than one node).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on_stack: BTreeSet<String>,
        found: Vec<Vec<String>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, node: &str) {
            let at = self.index.len();
            self.index.insert(node.to_string(), at);
            self.low.insert(node.to_string(), at);
            self.stack.push(node.to_string());
            self.on_stack.insert(node.to_string());
            let next: Vec<String> = self
                .edges
                .get(node)
                .into_iter()
                .flatten()
                .cloned()
                .collect();
            for to in next {
                if !self.index.contains_key(&to) {
                    self.visit(&to);
                    let low = self.low[node].min(self.low[&to]);
                    self.low.insert(node.to_string(), low);
                } else if self.on_stack.contains(&to) {
                    let low = self.low[node].min(self.index[&to]);
                    self.low.insert(node.to_string(), low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(&member);
                    let done = member == node;
                    component.push(member);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !tarjan.index.contains_key(node) {
            tarjan.visit(node);
        }
    }
    tarjan.found
}

/// The top-level and file-level module graphs of `src/`.
fn graphs() -> (
    BTreeMap<String, BTreeSet<String>>,
    BTreeMap<String, BTreeSet<String>>,
) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut modules = BTreeSet::new();
    let mut parsed = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&root).expect("under src/");
        let module = module_of(relative);
        if module == ["lib"] || module == ["main"] {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("a source file is readable");
        modules.insert(module.clone());
        parsed.push((module, code_of(&text)));
    }
    let mut top = BTreeMap::<String, BTreeSet<String>>::new();
    let mut files = BTreeMap::<String, BTreeSet<String>>::new();
    for (module, code) in &parsed {
        let from = module.join("::");
        top.entry(module[0].clone()).or_default();
        files.entry(from.clone()).or_default();
        for path in named_paths(module, code) {
            let Some(to) = resolve(&modules, &path) else {
                continue;
            };
            if to[0] != module[0] {
                top.entry(module[0].clone())
                    .or_default()
                    .insert(to[0].clone());
            }
            // A module and its own files (a parent declares its children,
            // a child reads its parent's items) are one unit.
            let nested = to.starts_with(module) || module.starts_with(to);
            if !nested {
                files.entry(from.clone()).or_default().insert(to.join("::"));
            }
        }
    }
    (top, files)
}

#[test]
fn no_top_level_module_cycles() {
    let (top, _) = graphs();
    assert!(top.len() > 20, "the graph was read: {top:?}");
    assert!(
        top["proxy"].contains("translate"),
        "a known edge is seen: {:?}",
        top["proxy"]
    );
    assert_eq!(cycles(&top), Vec::<Vec<String>>::new());
}

#[test]
fn no_file_level_module_cycles() {
    let (_, files) = graphs();
    assert!(
        files["cache::changes"].contains("cache::store"),
        "a known edge is seen: {:?}",
        files["cache::changes"]
    );
    assert_eq!(cycles(&files), Vec::<Vec<String>>::new());
}

#[test]
fn a_cycle_is_found() {
    let edges = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
        ("d".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(cycles(&edges), vec![vec!["a", "b", "c"]]);
}
