package persistence

// Durability says when an append is acknowledged.
type Durability int

const (
	// DurabilitySync acknowledges a write only after it is fsynced. Writes
	// that arrive together share one sync (group commit).
	DurabilitySync Durability = iota
	// DurabilityRelaxed acknowledges a write once it is in the OS page
	// cache: it survives a process crash but not a power loss.
	DurabilityRelaxed
)
