package archtest

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/contextinfinity/ctxinf"

// A pattern names packages by their path inside the module: "actors" is
// that package alone, "persistence/..." is persistence and every package
// below it, so that a subpackage falls under its parent's rule; "." is
// the module's root package. A package's rule is the one whose pattern
// matches it most closely (the longest).
//
// layers says which packages of the module each package may import, in
// its non-test files. Tests may import anything they need to drive the
// package (client's tests run internal/server, for one).
var layers = []struct {
	pkg, why string
	may      []string
}{
	// Plain data at the bottom.
	{"messages/...", "messages is plain data", []string{"messages/..."}},
	{"api/...", "api is the HTTP API's types, plain data", []string{"messages", "api/..."}},
	{"export/...", "export is the format of a session's export, plain data", []string{"messages", "export/..."}},

	// Foundations: each imports messages at most, and its own tree;
	// retrieval measures its chunks with providers/tokens' estimate.
	{"internal/core/...", "the core is the deterministic heart", []string{"messages", "internal/core/..."}},
	{"internal/retrieval/...", "retrieval is below the runtime", []string{"messages", "providers/tokens", "internal/retrieval/..."}},
	{"internal/config/...", "config is loaded by cmd and passed down", []string{"internal/config/..."}},
	{"supervision/...", "supervision is below the runtime", []string{"supervision/..."}},
	{"internal/faults", "faults is below the runtime", []string{"messages", "supervision"}},
	{"persistence/...", "persistence is the storage layer", []string{"messages", "persistence/..."}},
	{"persistence", "persistence is what the storage engines share", []string{"messages"}},
	{"persistence/badgerdb/...", "badgerdb is a storage engine", []string{"messages", "persistence", "persistence/commit"}},
	{"providers/...", "providers are the model adapters", []string{"messages", "providers/..."}},
	{"providers/tokens/...", "providers/tokens counts tokens", []string{"providers/tokens/..."}},

	// Test helpers, imported by tests and the benchmark commands.
	{"internal/fakeapi", "fakeapi is a test helper", nil},
	{"internal/pgtest", "pgtest is a test helper", nil},
	{"internal/netcut", "netcut is a test helper", nil},
	{"internal/golden", "golden is a test helper the core's tests import", nil},
	{"internal/archtest", "archtest is a test", nil},

	// The runtime.
	{"actors/...", "actors is the runtime", []string{
		"messages", "internal/core", "internal/retrieval", "supervision", "internal/faults",
		"persistence/...", "providers/...", "export", "actors/...",
	}},

	// The runtime built from a Config.
	{"internal/wiring/...", "wiring builds the runtime from the config", []string{
		"messages", "internal/core", "internal/retrieval", "internal/config", "supervision",
		"persistence/...", "providers/...", "actors/...", "internal/wiring/...",
	}},

	// Surfaces over the runtime.
	{".", "the root package is the embedding API", []string{
		"messages", "internal/core", "internal/retrieval", "internal/config", "supervision",
		"persistence/...", "providers/...", "actors/...", "internal/wiring/...",
	}},
	{"internal/auth/...", "the server's bearer tokens are below the servers", []string{"messages", "persistence", "internal/auth/..."}},
	{"internal/server/frame", "the frame server is a surface", []string{"messages", "persistence", "internal/auth"}},
	{"client/frame", "the frame client speaks the frame protocol", []string{"messages", "persistence", "internal/server/frame"}},
	{"client/...", "client is the HTTP API's Go client", []string{"messages", "api/...", "client/..."}},
	{"internal/server/...", "the HTTP server is a surface", []string{
		"messages", "internal/core", "internal/retrieval", "internal/auth", "internal/config", "persistence",
		"providers", "providers/tokens", "actors/...", "api/...", "export", "internal/server/...",
	}},
	{"internal/mcpserver/...", "the MCP server is a surface over the HTTP API's client", []string{
		"messages", "api/...", "client", "internal/mcpserver/...",
	}},
	{"internal/tui/...", "the terminal UI is a surface", []string{
		"messages", "api/...", "internal/tui/...",
	}},
	{"internal/cluster/...", "cluster joins servers", []string{
		"messages", "persistence", "actors/...", "internal/server", "internal/cluster/...",
	}},

	// Commands, the packages that implement them and end-to-end tests
	// may import any package (a main package cannot be imported).
	{"cmd/...", "", []string{"*"}},
	{"internal/cli/...", "", []string{"*"}},
	{"tests/...", "", []string{"*"}},
}

// outside says which packages of the module may import a package from
// outside it: only an engine's package knows its database (Badger,
// PostgreSQL), only config reads viper, only the providers (and the
// commands' benchmark clients, which talk to the proxy as an application
// does) use a provider's SDK.
// A module with no entry here may be imported anywhere.
var outside = []struct {
	mod string
	may []string
}{
	{"github.com/dgraph-io/badger/...", []string{"persistence/badgerdb"}},
	{"github.com/jackc/pgx/...", []string{"persistence/pgdb", "internal/pgtest", "cmd/...", "internal/cli/..."}},
	{"github.com/spf13/viper/...", []string{"internal/config"}},
	{"github.com/openai/openai-go/...", []string{"providers/openai/...", "cmd/...", "internal/cli/..."}},
	{"github.com/anthropics/anthropic-sdk-go/...", []string{"providers/anthropic/...", "cmd/...", "internal/cli/..."}},
	{"github.com/kelindar/search/...", []string{"internal/retrieval"}},
	{"charm.land/...", []string{"internal/tui/..."}},
	{"github.com/modelcontextprotocol/go-sdk/...", []string{"internal/mcpserver/...", "cmd/...", "internal/cli/...", "tests/..."}},
	// persistence/storetest, the stores' conformance kit, runs an actor
	// over an ActorLog as the runtime does.
	{"github.com/asynkron/protoactor-go/...", []string{"actors/...", "supervision", "internal/cluster/...", "persistence/storetest"}},
	// The actor logs implement protoactor's persistence provider.
	{"github.com/asynkron/protoactor-go/persistence", []string{"actors/...", "persistence/..."}},
}

// match reports whether pattern names pkg, and how closely (the
// pattern's length; -1 for no match).
func match(pattern, pkg string) int {
	switch {
	case pattern == "*":
		return 0
	case pattern == pkg:
		return len(pattern) + 1
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		if pkg == base || strings.HasPrefix(pkg, base+"/") {
			return len(base)
		}
	}
	return -1
}

func allowed(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if match(p, pkg) >= 0 {
			return true
		}
	}
	return false
}

// TestImportDirection fails for every import a package's layer does not
// allow, naming the package, the import and the rule.
func TestImportDirection(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := modulePackages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found %d packages under %s; the walk is broken", len(pkgs), root)
	}
	for _, p := range pkgs {
		rule := -1
		best := -1
		for i, l := range layers {
			if m := match(l.pkg, p.rel); m > best {
				rule, best = i, m
			}
		}
		if rule < 0 {
			t.Errorf("package %s has no layer: add it to docs/ARCHITECTURE.md and to layers in %s", p.rel, "internal/archtest/imports_test.go")
			continue
		}
		l := layers[rule]
		for _, imp := range p.imports {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
				if dep == "" {
					dep = "."
				}
				if !allowed(l.may, dep) {
					t.Errorf("%s imports %s: forbidden; %s and may import only %s (rule %q, docs/ARCHITECTURE.md)",
						p.rel, dep, l.why, list(l.may), l.pkg)
				}
				continue
			}
			out, best := -1, -1
			for i, o := range outside {
				if m := match(o.mod, imp); m > best {
					out, best = i, m
				}
			}
			if out >= 0 && !allowed(outside[out].may, p.rel) {
				t.Errorf("%s imports %s: forbidden; only %s may import it (docs/ARCHITECTURE.md)",
					p.rel, imp, list(outside[out].may))
			}
		}
	}
}

func list(patterns []string) string {
	if len(patterns) == 0 {
		return "nothing of the module"
	}
	return strings.Join(patterns, ", ")
}

type pkg struct {
	rel     string // path inside the module, "." for the root
	imports []string
}

// modulePackages reads the non-test imports of every package under root,
// skipping testdata, hidden directories and nested modules.
func modulePackages(root string) ([]pkg, error) {
	var pkgs []pkg
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		bp, err := build.ImportDir(path, 0)
		if err != nil {
			var none *build.NoGoError
			if errors.As(err, &none) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		pkgs = append(pkgs, pkg{rel: filepath.ToSlash(rel), imports: bp.Imports})
		return nil
	})
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].rel < pkgs[j].rel })
	return pkgs, err
}

// moduleRoot is the directory of the go.mod above the test's directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("archtest: no go.mod above the test's directory")
		}
		dir = parent
	}
}
