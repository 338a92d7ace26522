//! Builds the four built-in assignors from source into WebAssembly
//! components and embeds them in the `assignd` binary (`builtin.rs` in
//! OUT_DIR). No prebuilt .wasm is committed: the wasm32 target comes from
//! `rustup target add wasm32-unknown-unknown`.
//!
//! `ASSIGND_BUILTIN_DIR` may name a directory that already holds
//! `assignor-<name>.wasm` components (a packager's prebuilt set); then no
//! nested build runs.

use std::path::{Path, PathBuf};

const BUILTINS: &[(&str, &str)] = &[
    ("range", "assignor-range"),
    ("round-robin", "assignor-round-robin"),
    ("sticky", "assignor-sticky"),
    ("learner-aware", "assignor-learner-aware"),
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().unwrap().to_path_buf();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-env-changed=ASSIGND_BUILTIN_DIR");
    println!("cargo:rerun-if-env-changed=ASSIGND_GUEST_TARGET_DIR");

    let components: Vec<(&str, PathBuf)> = match std::env::var_os("ASSIGND_BUILTIN_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            BUILTINS
                .iter()
                .map(|(name, package)| {
                    let path = dir.join(format!("{package}.wasm"));
                    println!("cargo:rerun-if-changed={}", path.display());
                    (*name, path)
                })
                .collect()
        }
        None => {
            let package_dirs: Vec<String> = BUILTINS
                .iter()
                .map(|(name, _)| format!("assignors/{name}"))
                .chain(["assignors/balance".to_owned()])
                .collect();
            let dirs: Vec<&str> = package_dirs.iter().map(String::as_str).collect();
            for path in assignd_guest_build::watched_paths(&workspace, &dirs) {
                println!("cargo:rerun-if-changed={}", path.display());
            }
            let packages: Vec<&str> = BUILTINS.iter().map(|(_, p)| *p).collect();
            let guests =
                assignd_guest_build::build(&workspace, &packages, &out_dir.join("builtin"))
                    .unwrap_or_else(|e| panic!("building the built-in assignors: {e}"));
            BUILTINS
                .iter()
                .zip(guests)
                .map(|((name, _), guest)| (*name, guest.component))
                .collect()
        }
    };
    write_builtin_table(&out_dir, &components);
}

fn write_builtin_table(out_dir: &Path, components: &[(&str, PathBuf)]) {
    let mut code = String::from(
        "/// The built-in assignors: (name, component bytes).\n\
         pub const BUILTIN_COMPONENTS: &[(&str, &[u8])] = &[\n",
    );
    for (name, path) in components {
        code.push_str(&format!(
            "    ({name:?}, include_bytes!({:?})),\n",
            path.display().to_string()
        ));
    }
    code.push_str("];\n");
    std::fs::write(out_dir.join("builtin.rs"), code).unwrap();
}
