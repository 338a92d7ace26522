//! Files and functions small enough to read: no file under `host/src`
//! longer than 800 lines unless its module doc says why (a line starting
//! `//! Longer than 800 lines because`), no function longer than 100
//! lines, counted from `fn` to its closing brace. Test code is exempt
//! from both: `tests.rs` files, `tests/` folders, modules declared under
//! `#[cfg(test)]` and items marked `#[cfg(test)]` or `#[test]`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

use crate::common::source_tree::{SourceTree, host_src, is_test_only, item_attrs, rust_files};

const FILE_LINES_MAX: usize = 800;
const FN_LINES_MAX: usize = 100;
const FILE_REASON: &str = "//! Longer than 800 lines because";

/// Files allowed over the limit without a stated reason, by their path
/// under `host/src`. None is: the test fails on any other long file, and
/// on an entry that is no longer too long, so the list cannot go stale.
const ALLOWED_LONG_FILES: &[&str] = &[];

/// Functions allowed over the limit, as
/// `path under host/src: Type::name` (`path: name` outside an impl).
/// Same rule as [`ALLOWED_LONG_FILES`].
const ALLOWED_LONG_FNS: &[&str] = &[];

#[test]
fn files_and_functions_stay_short() {
    let files = non_test_files();
    let mut long_files = BTreeSet::new();
    let mut long_fns = BTreeSet::new();
    let mut report = Vec::new();
    for path in &files {
        let name = relative(path);
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let lines = text.lines().count();
        let explained = text.lines().any(|line| line.starts_with(FILE_REASON));
        if lines > FILE_LINES_MAX && !explained {
            report.push(format!("{name}: {lines} lines"));
            long_files.insert(name.clone());
        }
        let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut finder = LongFns {
            file: &name,
            impl_types: Vec::new(),
            found: Vec::new(),
        };
        finder.visit_file(&syntax);
        for (function, lines) in finder.found {
            report.push(format!("{function}: {lines} lines"));
            long_fns.insert(function);
        }
    }

    let mut failures = Vec::new();
    check_against(
        &long_files,
        ALLOWED_LONG_FILES,
        "ALLOWED_LONG_FILES",
        &mut failures,
    );
    check_against(
        &long_fns,
        ALLOWED_LONG_FNS,
        "ALLOWED_LONG_FNS",
        &mut failures,
    );
    assert!(
        failures.is_empty(),
        "{}\n\nover the limits ({FILE_LINES_MAX} lines a file without `{FILE_REASON} …`, \
         {FN_LINES_MAX} a function):\n{}",
        failures.join("\n"),
        report.join("\n")
    );
}

/// Fails on an offender not allowed, and on an allowed one that is none.
fn check_against(found: &BTreeSet<String>, allowed: &[&str], list: &str, out: &mut Vec<String>) {
    let allowed: BTreeSet<String> = allowed.iter().map(|s| (*s).to_owned()).collect();
    for name in found.difference(&allowed) {
        out.push(format!("too long: {name}"));
    }
    for name in allowed.difference(found) {
        out.push(format!("{name} is short enough now: remove it from {list}"));
    }
}

/// The `.rs` files under `host/src` that are not test code.
fn non_test_files() -> Vec<PathBuf> {
    let tree = SourceTree::read();
    rust_files(&host_src())
        .into_iter()
        .filter(|path| !tree.test_files.contains(path) && !is_test_path(path))
        .collect()
}

fn is_test_path(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == "tests.rs")
        || relative_path(path)
            .components()
            .any(|part| part.as_os_str() == "tests")
}

fn relative_path(path: &Path) -> &Path {
    path.strip_prefix(host_src()).unwrap_or(path)
}

fn relative(path: &Path) -> String {
    relative_path(path).display().to_string()
}

/// The functions of one file over [`FN_LINES_MAX`], test code left out.
struct LongFns<'a> {
    file: &'a str,
    /// The type of each `impl` block the walk is in, innermost last.
    impl_types: Vec<String>,
    found: Vec<(String, usize)>,
}

impl LongFns<'_> {
    fn measure(&mut self, name: &syn::Ident, fn_token: &syn::token::Fn, body: &syn::Block) {
        let first = fn_token.span.start().line;
        let last = body.brace_token.span.close().end().line;
        let lines = last - first + 1;
        if lines > FN_LINES_MAX {
            let function = match self.impl_types.last() {
                Some(ty) => format!("{}: {ty}::{name}", self.file),
                None => format!("{}: {name}", self.file),
            };
            self.found.push((function, lines));
        }
    }
}

impl<'ast> Visit<'ast> for LongFns<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_only(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(&f.sig.ident, &f.sig.fn_token, &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, block: &'ast syn::ItemImpl) {
        let ty = &block.self_ty;
        let name = quote_type(ty);
        self.impl_types.push(name);
        syn::visit::visit_item_impl(self, block);
        self.impl_types.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_only(&f.attrs) {
            return;
        }
        self.measure(&f.sig.ident, &f.sig.fn_token, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.measure(&f.sig.ident, &f.sig.fn_token, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// An impl's type by its last path segment (`Node` for `impl<T> node::Node<T>`).
fn quote_type(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(path) => path
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => "_".to_owned(),
    }
}
