//! The end-to-end tests, one module a file, linked into one test binary
//! (`cargo test -p assignd --test e2e`; `… --test e2e serve::` runs one
//! file's tests). One binary links the crate and its dependencies once
//! instead of once a file.
//!
//! The files share one process, so nothing in one may assume it runs
//! alone: a scratch directory carries its file's name
//! ([`common::scratch`]), and the files whose tests take turns (a lock of
//! their own) rely on the test harness running tests in name order, so a
//! file's tests run one after another and at most one test of another
//! file runs beside one of them, at the file's edges.

mod common;

mod big_groups;
mod check;
mod cli_run;
mod clients;
mod cluster;
mod cluster_restart;
mod code_size;
mod crash;
mod demo;
mod docs;
mod etcd_cluster;
mod etcd_failover;
mod guest_failure;
mod guide;
mod hardening;
mod hot_swap;
mod imports;
mod kv;
mod kv_cluster;
mod languages;
mod limits;
mod load_balance;
mod loadgen;
mod loads;
mod logs;
mod metrics;
mod openapi_statuses;
mod plugin_runtime;
mod registry;
mod remote_cli;
mod rollout;
mod rollout_cluster;
mod routes;
mod routes_cluster;
mod serve;
mod shadow;
mod shards;
mod upgrade;
mod wit_versions;
