//! Crafted components a host must refuse or bound, built in memory: a
//! foreign import, a module slow to compile, one whose compiled artifact
//! is large, a start function that never returns. Shared by the end-to-end tests (through `common`) and by the
//! hostile-guests benchmark's builder (host/examples/hostile_guests.rs),
//! so it uses nothing but `wat` and `wasmparser`.

/// A component that imports a WASI interface.
pub const WASI_IMPORT_WAT: &str = r#"
(component
  (import "wasi:cli/environment@0.2.0" (instance))
)"#;

/// The locals of [`slow_to_compile_component`].
pub const SLOW_TO_COMPILE_LOCALS: usize = 12_000;

/// A component whose core module costs Cranelift many seconds to compile
/// (12,000 locals, each updated from another inside a loop: register
/// allocation over all of them; 20,000 took 29 s here) for a few hundred
/// KB: the crafted upload a host must bound its compile against. It
/// imports nothing and exports our interface by name, so every check
/// before the compile passes.
pub fn slow_to_compile_component() -> Vec<u8> {
    slow_to_compile_component_with(SLOW_TO_COMPILE_LOCALS)
}

/// [`slow_to_compile_component`] with `locals` locals: the compile's time
/// grows faster than linearly with them.
pub fn slow_to_compile_component_with(locals: usize) -> Vec<u8> {
    let mut body = String::new();
    for i in 0..locals {
        body.push_str(&format!("(local.set {i} (i64.const {i}))"));
    }
    body.push_str("(loop $l");
    for i in 0..locals {
        let other = (i * 7919) % locals;
        body.push_str(&format!(
            "(local.set {i} (i64.add (local.get {i}) (local.get {other})))"
        ));
    }
    body.push_str("(br_if $l (i32.wrap_i64 (local.get 0))))");
    let types = vec!["i64"; locals].join(" ");
    wat::parse_str(format!(
        r#"(component
             (core module (func (local {types}) {body}))
             (instance $a)
             (export "assignd:assignor/assignor@0.1.0" (instance $a)))"#
    ))
    .expect("the crafted component parses")
}

/// A component whose compiled artifact is many times its size and quick
/// to make: `functions` functions of a few instructions each (each
/// compiles to its own machine code, unwind and trap tables), ~28 bytes
/// of component per function. Like [`slow_to_compile_component`], it
/// passes every check before the compile.
pub fn big_artifact_component(functions: usize) -> Vec<u8> {
    let mut funcs = String::new();
    for i in 0..functions {
        funcs.push_str(&format!(
            "(func (param i64) (result i64) (i64.add (i64.mul (local.get 0) (i64.const {i})) (i64.const 7)))"
        ));
    }
    wat::parse_str(format!(
        r#"(component
             (core module {funcs})
             (instance $a)
             (export "assignd:assignor/assignor@0.1.0" (instance $a)))"#
    ))
    .expect("the crafted component parses")
}

/// `core` (a core module) with one more function, `loop br 0 end`, made
/// its start function: instantiating it never returns. Given a guest's
/// core module built with wit-bindgen, the component made of the result
/// has our world's exact shape and passes every check before it is
/// instantiated, as the registry does to call `info()` on an upload.
pub fn with_start_loop(core: &[u8]) -> Vec<u8> {
    use wasmparser::{Parser, Payload, TypeRef};
    const TYPE: u8 = 1;
    const FUNCTION: u8 = 3;
    const START: u8 = 8;
    const CODE: u8 = 10;
    // After the start section come the element, data count, code and
    // data sections.
    const AFTER_START: [u8; 4] = [9, 12, 10, 11];

    let mut imported_funcs = 0u32;
    let mut types = None;
    let mut defined_funcs = 0u32;
    for payload in Parser::new(0).parse_all(core) {
        match payload.expect("a valid core module") {
            Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    let import = import.expect("a valid import");
                    if matches!(import.ty, TypeRef::Func(_) | TypeRef::FuncExact(_)) {
                        imported_funcs += 1;
                    }
                }
            }
            Payload::TypeSection(section) => types = Some(section.count()),
            Payload::FunctionSection(section) => defined_funcs = section.count(),
            Payload::StartSection { .. } => panic!("the module has a start function already"),
            _ => {}
        }
    }
    let types = types.expect("a module with functions has a type section");
    let looping = imported_funcs + defined_funcs;

    let mut out = core[..8].to_vec();
    let mut rest = &core[8..];
    let mut started = false;
    while let Some((&id, after_id)) = rest.split_first() {
        let (len, after_len) = read_leb(after_id);
        let (contents, next) = after_len.split_at(len as usize);
        rest = next;
        if !started && AFTER_START.contains(&id) {
            section(&mut out, START, &leb(looping));
            started = true;
        }
        match id {
            // () -> ()
            TYPE => section(&mut out, id, &appended(contents, &[0x60, 0, 0])),
            FUNCTION => section(&mut out, id, &appended(contents, &leb(types))),
            // No locals; loop; br 0; end; end.
            CODE => section(
                &mut out,
                id,
                &appended(contents, &[7, 0, 0x03, 0x40, 0x0c, 0, 0x0b, 0x0b]),
            ),
            _ => section(&mut out, id, contents),
        }
    }
    assert!(started, "a module with functions has a code section");
    out
}

/// A vector section's contents with one more entry at its end.
fn appended(contents: &[u8], entry: &[u8]) -> Vec<u8> {
    let (count, entries) = read_leb(contents);
    let mut out = leb(count + 1);
    out.extend_from_slice(entries);
    out.extend_from_slice(entry);
    out
}

fn section(out: &mut Vec<u8>, id: u8, contents: &[u8]) {
    out.push(id);
    out.extend(leb(contents.len() as u32));
    out.extend_from_slice(contents);
}

fn leb(mut value: u32) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn read_leb(bytes: &[u8]) -> (u32, &[u8]) {
    let mut value = 0u32;
    for (i, &byte) in bytes.iter().enumerate().take(5) {
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (value, &bytes[i + 1..]);
        }
    }
    panic!("a malformed LEB128 number")
}
