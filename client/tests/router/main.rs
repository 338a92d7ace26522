//! Routing: the router's loop against a fake host (`fake`), and a
//! member's endpoint on the wire (`endpoint`).

mod endpoint;
mod fake;
