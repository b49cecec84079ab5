package badgerdb

// What the external tests (conformance_test.go) reach inside the package.
var FilesHolding = filesHolding
