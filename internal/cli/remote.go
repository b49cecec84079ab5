package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/persistence"
)

// ServerFile is the file `ctxinf serve` writes in the data directory
// while it serves: how other commands on the same data directory reach
// it, since they cannot open a store it owns.
const ServerFile = "server.json"

// serverInfo is ServerFile's content.
type serverInfo struct {
	URL string `json:"url"` // the HTTP API
	PID int    `json:"pid"`
}

// WriteServerFile writes dir/ServerFile for a server at url; remove
// deletes it (at a clean stop). A killed server leaves it behind: it is
// read only when the store is locked, which a dead process's is not.
func WriteServerFile(dir, url string) (remove func(), err error) {
	b, err := json.Marshal(serverInfo{URL: url, PID: os.Getpid()})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, ServerFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return func() { _ = os.Remove(path) }, nil
}

// Remote returns the client a command uses instead of opening the data
// directory: of the server at serverURL (--server), or, when opening the
// store failed because another process holds it (openErr), of the server
// that wrote ServerFile there. It returns nil and openErr otherwise.
func (e *Env) Remote(serverURL string, openErr error) (*client.Client, error) {
	var opts []client.Option
	if env := e.Config.Server.TokensEnv; env != "" {
		if t, _, _ := strings.Cut(os.Getenv(env), ","); strings.TrimSpace(t) != "" {
			opts = append(opts, client.WithToken(strings.TrimSpace(t)))
		}
	}
	if serverURL != "" {
		return client.New(strings.TrimRight(serverURL, "/"), opts...), nil
	}
	if !errors.Is(openErr, persistence.ErrLocked) {
		return nil, openErr
	}
	b, err := os.ReadFile(filepath.Join(e.Config.DataDir, ServerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the data directory %s is in use by another process, which left no %s: stop it, or pass --server URL to talk to it",
			e.Config.DataDir, ServerFile)
	}
	if err != nil {
		return nil, err
	}
	var info serverInfo
	if err := json.Unmarshal(b, &info); err != nil || info.URL == "" {
		return nil, fmt.Errorf("%s: not a server file (%v): pass --server URL", filepath.Join(e.Config.DataDir, ServerFile), err)
	}
	e.Log.Debug().Str("url", info.URL).Int("pid", info.PID).Msg("the data directory is a running server's: using its API")
	return client.New(info.URL, opts...), nil
}
