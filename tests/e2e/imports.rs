//! No circle of imports between the host crate's modules: neither between
//! the files of one parent module (`cluster::node` using
//! `cluster::directory` while `cluster::directory` uses `cluster::node`)
//! nor between top-level modules (`runtime` and `telemetry`), at any
//! depth. A module that uses its parent or its child is no circle: a
//! parent re-exports its children and children share their parent's
//! types.
//!
//! What a module uses: every `use` declaration, and every path in its code
//! that starts with `crate::`, `self::`, `super::` or the name of one of
//! its child modules (doc comments and other attributes are not code).
//! A path ending at a re-export counts as a use of the module the name
//! comes from. Items and modules only tests compile (`#[cfg(test)]`,
//! `#[test]`) are left out. A use inside a file counts for the whole
//! subtree: `cluster::node` using `runtime::admin` is an edge from
//! `cluster` to `runtime` among the top-level modules.

use std::collections::{BTreeMap, BTreeSet};

use syn::visit::Visit;

use crate::common::source_tree::{
    Imports, ModulePath, SourceTree, display, is_test_only, item_attrs, use_paths,
};

/// Circles allowed, each named by its modules (one strongly connected
/// set: every module in it reaches every other) with the reason in a
/// comment. None is: the test fails on any circle not listed here, and on
/// an entry that is no longer a circle, so the list cannot go stale.
const ALLOWED_CIRCLES: &[&[&str]] = &[];

/// One reference from code in `from` to the module `to`.
struct Use {
    from: ModulePath,
    to: ModulePath,
    /// `file:line: path`, to print.
    at: String,
}

#[test]
fn no_module_imports_form_a_circle() {
    let tree = SourceTree::read();
    let imports = imports(&tree);
    let uses = uses(&tree, &imports);
    let circles = circles(&uses);

    let allowed: BTreeSet<BTreeSet<String>> = ALLOWED_CIRCLES
        .iter()
        .map(|modules| modules.iter().map(|m| format!("crate::{m}")).collect())
        .collect();
    let mut failures = Vec::new();
    for (modules, edges) in &circles {
        if !allowed.contains(modules) {
            failures.push(format!(
                "a circle between {modules:?}:\n{}",
                edges.join("\n")
            ));
        }
    }
    for modules in allowed.difference(&circles.keys().cloned().collect()) {
        failures.push(format!(
            "{modules:?} is no longer a circle: remove it from ALLOWED_CIRCLES"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Every module's `use` declarations by the name they bind, absolute.
fn imports(tree: &SourceTree) -> Imports {
    let mut collector = Collector {
        tree,
        file: "",
        modules: Vec::new(),
        imports: Imports::new(),
        raw: Vec::new(),
    };
    for file in &tree.files {
        collector.file = file.path.to_str().expect("a UTF-8 path");
        collector.modules = vec![file.module.clone()];
        collector.visit_file(&file.syntax);
    }
    collector.imports
}

/// Every reference from one module to another, re-exports followed.
fn uses(tree: &SourceTree, imports: &Imports) -> Vec<Use> {
    let mut collector = Collector {
        tree,
        file: "",
        modules: Vec::new(),
        imports: Imports::new(),
        raw: Vec::new(),
    };
    let root = crate::common::workspace_root();
    for file in &tree.files {
        let relative = file.path.strip_prefix(&root).unwrap_or(&file.path);
        collector.file = relative.to_str().expect("a UTF-8 path");
        collector.modules = vec![file.module.clone()];
        collector.visit_file(&file.syntax);
    }
    collector
        .raw
        .into_iter()
        .map(|(from, absolute, at)| Use {
            to: resolve(tree, imports, &absolute, 0),
            from,
            at,
        })
        .filter(|u| u.to != u.from)
        .collect()
}

/// The module an absolute path names: the deepest module it walks
/// through, following re-exports (`use`) on the way.
fn resolve(tree: &SourceTree, imports: &Imports, path: &[String], depth: usize) -> ModulePath {
    let mut module = ModulePath::new();
    for (i, segment) in path.iter().enumerate() {
        let mut child = module.clone();
        child.push(segment.clone());
        if tree.modules.contains(&child) {
            module = child;
            continue;
        }
        let reexport = imports.get(&module).and_then(|names| names.get(segment));
        if let Some(target) = reexport.filter(|_| depth < 16) {
            let mut next = target.clone();
            next.extend(path[i + 1..].iter().cloned());
            return resolve(tree, imports, &next, depth + 1);
        }
        break;
    }
    module
}

/// Walks one file's code: the module each item is in, the imports it
/// binds and the crate paths it names.
struct Collector<'a> {
    tree: &'a SourceTree,
    file: &'a str,
    /// The module being walked, innermost last (inline modules push).
    modules: Vec<ModulePath>,
    imports: Imports,
    /// (from, absolute path, where) of each crate path met.
    raw: Vec<(ModulePath, Vec<String>, String)>,
}

impl Collector<'_> {
    fn module(&self) -> &ModulePath {
        self.modules.last().expect("inside a module")
    }

    /// `segments` made absolute from the current module, if they name
    /// something in this crate.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let here = self.module();
        let first = segments.first()?;
        match first.as_str() {
            "crate" => Some(segments[1..].to_vec()),
            "self" => Some(here.iter().chain(&segments[1..]).cloned().collect()),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let base = &here[..here.len().checked_sub(ups)?];
                Some(base.iter().chain(&segments[ups..]).cloned().collect())
            }
            _ => {
                let mut child = here.clone();
                child.push(first.clone());
                self.tree
                    .modules
                    .contains(&child)
                    .then(|| here.iter().chain(segments).cloned().collect())
            }
        }
    }

    fn record(&mut self, segments: &[String], line: usize) {
        if let Some(absolute) = self.absolute(segments) {
            let at = format!("{}:{line}: {}", self.file, segments.join("::"));
            self.raw.push((self.module().clone(), absolute, at));
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_test_only(item_attrs(item)) {
            return;
        }
        match item {
            syn::Item::Mod(declared) => {
                let Some((_, items)) = &declared.content else {
                    return; // its own file
                };
                let mut inner = self.module().clone();
                inner.push(declared.ident.to_string());
                self.modules.push(inner);
                for item in items {
                    self.visit_item(item);
                }
                self.modules.pop();
            }
            _ => syn::visit::visit_item(self, item),
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Fn(f) => &f.attrs,
            syn::ImplItem::Const(c) => &c.attrs,
            _ => return syn::visit::visit_impl_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let line = item.use_token.span.start().line;
        for (name, path) in use_paths(&item.tree) {
            let Some(absolute) = self.absolute(&path) else {
                continue;
            };
            if name != "*" && !name.is_empty() {
                let module = self.module().clone();
                self.imports
                    .entry(module)
                    .or_default()
                    .insert(name, absolute.clone());
            }
            self.record(&path, line);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = path.segments[0].ident.span().start().line;
            self.record(&segments, line);
        }
        syn::visit::visit_path(self, path);
    }

    /// Doc comments and other attributes hold no code.
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    /// A macro's arguments are code when they parse as expressions
    /// (`format!`, `assert!`, `tracing::info!`).
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        syn::visit::visit_macro(self, mac);
        let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if let Ok(args) = mac.parse_body_with(parser) {
            for arg in &args {
                self.visit_expr(arg);
            }
        }
    }
}

/// The circles among sibling modules, each by its modules' names, with
/// the references that close it.
fn circles(uses: &[Use]) -> BTreeMap<BTreeSet<String>, Vec<String>> {
    // For each parent: an edge between two of its children whenever code
    // in one's subtree uses the other's.
    let mut levels: BTreeMap<ModulePath, BTreeMap<(ModulePath, ModulePath), Vec<&str>>> =
        BTreeMap::new();
    for u in uses {
        let common = u.from.iter().zip(&u.to).take_while(|(a, b)| a == b).count();
        if common == u.from.len() || common == u.to.len() {
            continue; // a parent and its child
        }
        let parent = u.from[..common].to_vec();
        let edge = (u.from[..=common].to_vec(), u.to[..=common].to_vec());
        levels
            .entry(parent)
            .or_default()
            .entry(edge)
            .or_default()
            .push(&u.at);
    }
    let mut found = BTreeMap::new();
    for edges in levels.values() {
        for component in strongly_connected(edges.keys()) {
            let mut lines = Vec::new();
            for ((from, to), at) in edges {
                if component.contains(from) && component.contains(to) {
                    lines.push(format!("  {} -> {}", display(from), display(to)));
                    lines.extend(at.iter().take(3).map(|at| format!("      {at}")));
                }
            }
            found.insert(component.iter().map(|m| display(m)).collect(), lines);
        }
    }
    found
}

/// The strongly connected components of more than one node (Tarjan).
fn strongly_connected<'a>(
    edges: impl Iterator<Item = &'a (ModulePath, ModulePath)>,
) -> Vec<BTreeSet<ModulePath>> {
    let mut graph: BTreeMap<&ModulePath, Vec<&ModulePath>> = BTreeMap::new();
    for (from, to) in edges {
        graph.entry(from).or_default().push(to);
        graph.entry(to).or_default();
    }
    let nodes: Vec<&ModulePath> = graph.keys().copied().collect();
    let index_of: BTreeMap<&ModulePath, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let successors: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| graph[n].iter().map(|to| index_of[to]).collect())
        .collect();
    let mut tarjan = Tarjan {
        successors: &successors,
        index: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on_stack: vec![false; nodes.len()],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for node in 0..nodes.len() {
        if tarjan.index[node].is_none() {
            tarjan.visit(node);
        }
    }
    tarjan
        .components
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| c.into_iter().map(|i| nodes[i].clone()).collect())
        .collect()
}

struct Tarjan<'a> {
    successors: &'a [Vec<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, node: usize) {
        self.index[node] = Some(self.next);
        self.low[node] = self.next;
        self.next += 1;
        self.stack.push(node);
        self.on_stack[node] = true;
        for &next in &self.successors[node] {
            match self.index[next] {
                None => {
                    self.visit(next);
                    self.low[node] = self.low[node].min(self.low[next]);
                }
                Some(index) if self.on_stack[next] => {
                    self.low[node] = self.low[node].min(index);
                }
                Some(_) => {}
            }
        }
        if Some(self.low[node]) == self.index[node] {
            let mut component = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack[member] = false;
                component.push(member);
                if member == node {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}
