// Package assignd is the Go member library of assignd, a group
// coordinator: a worker process joins a named group over HTTP, heartbeats,
// and is told which tasks (topic, partition) to process, with incremental
// cooperative rebalancing (revoke, then acknowledge), learner and standby
// warm-up, drains, static members and leases.
//
// Start runs a member; a Listener is told what to start and stop:
//
//	m, err := assignd.Start(ctx, assignd.Config{
//		URLs:   []string{"http://127.0.0.1:7070"},
//		Group:  "billing",
//		Topics: []string{"orders"},
//	}, assignd.ListenerFuncs{
//		OnAssigned: func(tasks []assignd.Task, promoted bool) { /* start */ },
//		OnRevoked:  func(tasks []assignd.Task) { /* stop, then return */ },
//		OnLost:     func(tasks []assignd.Task) { /* stop at once */ },
//	})
//
// Check Member.MayProcess before committing the output of a task: it is
// false once the lease of the last answer ran out, so a stalled process
// never writes after its task went elsewhere.
//
// The decisions are the Machine's, a port of the Rust client's member
// machine: no clock, no I/O, time passed in as milliseconds. It is replayed
// against the conformance vectors in clients/conformance/vectors. The
// Member drives it with a transport that follows a cluster's redirects and
// tells which failed heartbeats certainly reached no coordinator.
package assignd
