package archtest

import (
	"strings"
	"testing"
)

// TestClientLinksNoRuntime fails if the HTTP API's types (api), its Go
// client (client) or the export format (export) import the runtime or
// the storage layer, directly or through any package of the module they
// import: a program that speaks the API, or reads and writes exports,
// links neither.
func TestClientLinksNoRuntime(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := modulePackages(root)
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string][]string{}
	for _, p := range pkgs {
		imports[p.rel] = p.imports
	}
	forbidden := []string{"actors/...", "persistence/..."}
	for _, top := range []string{"api", "client", "export"} {
		if _, ok := imports[top]; !ok {
			t.Fatalf("package %s not found under %s", top, root)
		}
		// Walk the module's imports from top, keeping the path that
		// reached each package for the message.
		via := map[string]string{top: top}
		queue := []string{top}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, imp := range imports[p] {
				if imp != module && !strings.HasPrefix(imp, module+"/") {
					continue
				}
				dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
				if dep == "" {
					dep = "."
				}
				if _, seen := via[dep]; seen {
					continue
				}
				via[dep] = via[p] + " -> " + dep
				if allowed(forbidden, dep) {
					t.Errorf("%s links %s (%s): a client of the API must not link the runtime or its storage", top, dep, via[dep])
					continue
				}
				queue = append(queue, dep)
			}
		}
	}
}
