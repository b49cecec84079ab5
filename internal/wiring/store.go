package wiring

import (
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/persistence/pgdb"
)

// StoreOptions maps the store section of c, and the store's key (nil: not
// encrypted), onto Badger's options for a store in dir.
func StoreOptions(c config.Config, key []byte, log zerolog.Logger, dir string) badgerdb.Options {
	o := badgerdb.DefaultOptions(dir)
	sc := c.Store
	o.EncryptionKey = key
	o.EncryptionKeyRotation = sc.EncryptionKeyRotation
	if sc.Durability == config.DurabilityRelaxed {
		o.Durability = persistence.DurabilityRelaxed
	}
	o.Compress = compression(sc.Compression, o.Compress)
	o.Limits.MaxPayloadBytes = sc.MaxPayloadBytes
	o.GroupCommitMax = sc.GroupCommitMax
	o.ValueThreshold = sc.ValueThresholdBytes
	o.MemTableSize = sc.MemTableBytes
	o.BlockCacheSize = sc.BlockCacheBytes
	o.ValueLogFileSize = sc.ValueLogFileBytes
	o.NodeCacheEntries = sc.NodeCacheEntries
	o.BlobCacheBytes = sc.BlobCacheBytes
	o.GCInterval = sc.GCInterval
	o.GCDiscardRatio = sc.GCDiscardRatio
	o.RedoLogBytes = sc.RedoLogBytes
	o.MinFreeBytes = sc.MinFreeBytes
	o.Logger = log.With().Str("component", "store").Logger()
	return o
}

// PostgresOptions maps the store section onto PostgreSQL's options when
// store.backend is postgres (the URL from the variable
// store.postgres_url_env names); nil for badger.
func PostgresOptions(c config.Config, log zerolog.Logger) (*pgdb.PGOptions, error) {
	url, err := c.PostgresURL()
	if err != nil || url == "" {
		return nil, err
	}
	o := PostgresOptionsAt(c, url, log)
	return &o, nil
}

// PostgresOptionsAt maps the store section onto PostgreSQL's options for
// the database at url.
func PostgresOptionsAt(c config.Config, url string, log zerolog.Logger) pgdb.PGOptions {
	sc := c.Store
	o := pgdb.DefaultPGOptions(url)
	o.Compress = compression(sc.Compression, o.Compress)
	o.Limits.MaxPayloadBytes = sc.MaxPayloadBytes
	o.GroupCommitMax = sc.GroupCommitMax
	o.MaxConns = int32(sc.PostgresMaxConns)
	o.NodeCacheEntries = sc.NodeCacheEntries
	o.Logger = log.With().Str("component", "store").Logger()
	return o
}

// compression maps store.compression onto the stores' option (def for
// zstd, their default).
func compression(c string, def persistence.Compression) persistence.Compression {
	switch c {
	case config.CompressionNone:
		return persistence.CompressNone
	case config.CompressionS2:
		return persistence.CompressS2
	}
	return def
}
