//! The router: its loop against a fake host (`fake`).

mod fake;
