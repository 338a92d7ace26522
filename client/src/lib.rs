//! The Rust member library for assignd. It is empty until the coordinator
//! (issue 3) gives members an HTTP protocol to speak.
