// Package archtest holds no code: its tests check that every package of
// the module imports only what its layer may (TestImportDirection;
// docs/ARCHITECTURE.md, "Direction of imports"), that the engines, SDKs
// and frameworks are imported only where the design puts them, and that
// the HTTP API's types and Go client link neither the runtime nor the
// store (TestClientLinksNoRuntime).
package archtest
