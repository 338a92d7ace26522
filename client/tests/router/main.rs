//! Routing: the router's loop against a fake host (`fake`), a member's
//! endpoint on the wire (`endpoint`), and both against the real binary
//! (`smoke`).

mod endpoint;
mod fake;
mod smoke;
