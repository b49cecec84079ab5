// Package badgerdb is the store on Badger: the context store
// (OpenBadger) and the Database (DB, Open) in one Badger database in a
// directory. It owns everything that knows Badger's keys, values and
// files: the key layout and records of the turn DAG and of the tables,
// the group committer and its redo log, the syncs of Badger's logs,
// value-log GC, hard delete (which drops keys and rewrites files),
// retention's and tenancy's rows, and the check of free space.
//
// What every engine shares (the row types, Tx and its checks, the
// errors, the blob and turn encodings, the actor logs, the stream
// journals and the cipher) is package persistence; the conformance kit
// this package's tests run is package storetest. Only this package
// imports Badger.
package badgerdb
