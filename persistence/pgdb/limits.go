package pgdb

import (
	"fmt"
	"time"

	"github.com/contextinfinity/ctxinf/persistence"
)

// Limits, space and cipher of PGDB: the last four methods of Database.

// pgMaxPayloadBytes is the largest store.max_payload_bytes a PostgreSQL
// store takes: a blob's record (the payload and its header) is one BYTEA
// value, which PostgreSQL bounds at 1 GiB, and the record needs room for
// its header (64 KiB, as Badger's value log file leaves).
const pgMaxPayloadBytes = 1<<30 - 64<<10

// checkPGLimits refuses limits a PostgreSQL store cannot honour.
func checkPGLimits(l persistence.Limits) error {
	if l.MaxPayloadBytes > pgMaxPayloadBytes {
		return fmt.Errorf("%w: payload limit %d (store.max_payload_bytes) is over %d, the most a PostgreSQL store "+
			"holds in one value (1 GiB less 64 KiB for the record's header)",
			persistence.ErrInvalidArgument, l.MaxPayloadBytes, pgMaxPayloadBytes)
	}
	return nil
}

// MaxPayloadBytes is the largest payload the store appends
// (store.max_payload_bytes).
func (d *PGDB) MaxPayloadBytes() int64 { return d.opts.Limits.MaxPayloadBytes }

// CheckPayload refuses a payload of n bytes that the store would refuse
// to append (over store.max_payload_bytes), naming field, as DB's does.
func (d *PGDB) CheckPayload(field string, n int) error {
	return d.opts.Limits.CheckSize(field, n)
}

// Cipher is nil: the PostgreSQL store has no encryption at rest of its
// own. Encrypting its data is the database's job (an encrypted volume,
// or the server's transparent data encryption); a runtime configured
// with store.encryption refuses to open a PostgreSQL store rather than
// write plaintext (actors.Open, and config validation).
func (d *PGDB) Cipher() *persistence.Cipher { return nil }

// CheckSpace returns a *SpaceError (errors.Is ErrNoSpace) for ServerFullHold
// after a write of the store failed because the PostgreSQL server's disk
// was full (disk_full, 53100), unless a write committed since; nil
// otherwise. The store cannot measure the server's disk (it may be
// another machine), so unlike Badger's it refuses new work only once the
// server has said it has no room, and store.min_free_bytes does not apply:
// keeping the server's disk from filling is the database's operators'
// job.
func (d *PGDB) CheckSpace() error { return d.pgStore.checkSpace() }

func (s *pgStore) checkSpace() error {
	s.spaceMu.Lock()
	defer s.spaceMu.Unlock()
	if s.diskFullAt.IsZero() {
		return nil
	}
	if since := s.opts.Now().Sub(s.diskFullAt); since < persistence.ServerFullHold {
		return &persistence.SpaceError{Server: "PostgreSQL", Since: since}
	}
	return nil
}

// noteWrite records the outcome of a group for checkSpace: a disk_full
// starts the hold, a commit ends it. It returns err, a disk_full wrapped
// in a *SpaceError so that errors.Is(err, ErrNoSpace).
func (s *pgStore) noteWrite(err error) error {
	full := err != nil && pgCode(err) == "53100"
	if err != nil && !full {
		return err
	}
	s.spaceMu.Lock()
	defer s.spaceMu.Unlock()
	if !full {
		s.diskFullAt = time.Time{}
		return nil
	}
	s.diskFullAt = s.opts.Now()
	return &persistence.SpaceError{Server: "PostgreSQL", Err: err}
}
