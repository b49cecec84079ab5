// Package bench holds the benchmark commands. ctxinf ships the load
// tests a user runs on their own machine and configuration (Turns, Serve,
// Cluster: `ctxinf bench turns|serve|cluster`); ctxinf-bench has the
// project's own harnesses (Store, Stream, Context, Retrieval, Import:
// `ctxinf-bench store|stream|context|retrieval|import`). Each prints a
// table, or one JSON object with --json.
package bench
