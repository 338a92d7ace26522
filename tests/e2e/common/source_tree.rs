//! The host crate's source as a tree of modules, read with `syn`: which
//! file holds which module, which files only tests compile, and what each
//! module's `use` declarations name. The checks of the code's shape
//! (`imports.rs`, `code_size.rs`) read the source through it; it never
//! builds or runs the crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside the crate, `["cluster", "node"]` for
/// `crate::cluster::node`; empty for the crate root.
pub type ModulePath = Vec<String>;

/// `crate::a::b`, or `crate` for the root.
pub fn display(module: &[String]) -> String {
    std::iter::once("crate")
        .chain(module.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("::")
}

/// One file of the crate's non-test code, parsed.
pub struct SourceFile {
    pub path: PathBuf,
    pub module: ModulePath,
    pub text: String,
    pub syntax: syn::File,
}

/// The library's modules, walked from `host/src/lib.rs` through its `mod`
/// declarations, without the modules only tests compile.
pub struct SourceTree {
    pub files: Vec<SourceFile>,
    /// Every module the walk found, inline ones included.
    pub modules: BTreeSet<ModulePath>,
    /// The files of modules declared under `#[cfg(test)]`, and the
    /// modules below them.
    pub test_files: BTreeSet<PathBuf>,
}

pub fn host_src() -> PathBuf {
    super::workspace_root().join("host/src")
}

impl SourceTree {
    /// Reads and parses the library crate under `host/src`.
    pub fn read() -> SourceTree {
        let mut tree = SourceTree {
            files: Vec::new(),
            modules: BTreeSet::new(),
            test_files: BTreeSet::new(),
        };
        tree.add_file(host_src().join("lib.rs"), host_src(), Vec::new());
        tree
    }

    /// Parses `path`, the file of `module`, whose `mod name;` children
    /// live in `children_dir`, and walks them.
    fn add_file(&mut self, path: PathBuf, children_dir: PathBuf, module: ModulePath) {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let syntax = syn::parse_file(&text).unwrap_or_else(|e| {
            let at = e.span().start();
            panic!("{}:{}:{}: {e}", path.display(), at.line, at.column + 1)
        });
        self.modules.insert(module.clone());
        let file_dir = path.parent().expect("a file in a folder").to_path_buf();
        self.add_children(&syntax.items, &children_dir, &file_dir, &module);
        self.files.push(SourceFile {
            path,
            module,
            text,
            syntax,
        });
    }

    /// Walks the `mod` declarations of `items`: `dir` holds the children's
    /// files, `file_dir` the declaring file (where `#[path]` starts).
    fn add_children(
        &mut self,
        items: &[syn::Item],
        dir: &Path,
        file_dir: &Path,
        module: &ModulePath,
    ) {
        for item in items {
            let syn::Item::Mod(declared) = item else {
                continue;
            };
            let name = declared.ident.to_string();
            let mut child = module.clone();
            child.push(name.clone());
            let test_only = is_test_only(&declared.attrs);
            let path_attr = path_attribute(&declared.attrs).map(|p| file_dir.join(p));
            match (&declared.content, test_only) {
                (Some((_, inline)), false) => {
                    self.modules.insert(child.clone());
                    self.add_children(inline, &dir.join(&name), file_dir, &child);
                }
                (Some(_), true) => {}
                (None, false) => {
                    let (file, children_dir) = match path_attr {
                        Some(file) => {
                            let dir = file.parent().expect("a file in a folder").to_path_buf();
                            (file, dir)
                        }
                        None => module_file(dir, &name),
                    };
                    self.add_file(file, children_dir, child);
                }
                (None, true) => {
                    let file = path_attr.unwrap_or_else(|| dir.join(format!("{name}.rs")));
                    self.test_files.insert(file);
                    self.test_files.extend(rust_files(&dir.join(&name)));
                }
            }
        }
    }
}

/// The file a `#[path = "…"]` attribute names.
fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| {
        let syn::Meta::NameValue(pair) = &attr.meta else {
            return None;
        };
        let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(path),
            ..
        }) = &pair.value
        else {
            return None;
        };
        pair.path.is_ident("path").then(|| path.value())
    })
}

/// The file of module `name` declared in a module whose children live in
/// `dir`, and the folder of its own children.
fn module_file(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let flat = dir.join(format!("{name}.rs"));
    if flat.is_file() {
        return (flat, dir.join(name));
    }
    let nested = dir.join(name).join("mod.rs");
    assert!(
        nested.is_file(),
        "neither {} nor {}",
        flat.display(),
        nested.display()
    );
    (nested, dir.join(name))
}

/// Every `.rs` file under `dir`, sorted; none if it does not exist.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Whether the attributes compile their item only for tests:
/// `#[cfg(test)]`, `#[cfg(all(test, …))]` or `#[test]`.
pub fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if attr.path().is_ident("test") {
            return true;
        }
        if !attr.path().is_ident("cfg") {
            return false;
        }
        let Ok(list) = attr.meta.require_list() else {
            return false;
        };
        let tokens = list.tokens.to_string().replace(' ', "");
        tokens == "test" || tokens.starts_with("all(test,")
    })
}

/// The attributes of an item, for the kinds that can carry `#[cfg(test)]`.
pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The names a `use` tree brings into scope, each with the path it names
/// (`use a::{b, c as d}` gives `b` → `a::b` and `d` → `a::c`), plus every
/// path it names, globs included, under the name `*`.
pub fn use_paths(tree: &syn::UseTree) -> Vec<(String, Vec<String>)> {
    fn walk(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut path = prefix.clone();
                if name != "self" {
                    path.push(name.clone());
                }
                let bound = if name == "self" {
                    prefix.last().cloned().unwrap_or_default()
                } else {
                    name
                };
                out.push((bound, path));
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                out.push((r.rename.to_string(), path));
            }
            syn::UseTree::Glob(_) => out.push(("*".to_owned(), prefix.clone())),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    walk(tree, prefix, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

/// Each module's imports by the name they bind (globs left out), the
/// paths made absolute: what `super::Name` or `crate::m::Name` means when
/// `Name` is a re-export.
pub type Imports = BTreeMap<ModulePath, BTreeMap<String, Vec<String>>>;
