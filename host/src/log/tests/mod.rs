//! The record log against its promises, one file per concern: a frame on
//! its own ([`codec`]); reading a written log back, torn tails, corruption,
//! missing segments and repair ([`recovery`]); compaction and its failures
//! ([`compaction`]); frames of older format versions built from their
//! shapes ([`legacy`]) and segments real old writers wrote ([`golden`]).
//! What they build on is in [`fixtures`].

mod codec;
mod compaction;
mod fixtures;
mod golden;
mod legacy;
mod recovery;
