// Package archtest holds no code: its test, TestImportDirection, checks
// that every package of the module imports only what its layer may
// (docs/ARCHITECTURE.md, "Direction of imports"), and that the engines,
// SDKs and frameworks are imported only where the design puts them.
package archtest
