package messages

import (
	"fmt"
	"strings"
)

// MemoryTools is a branch's setting of the runtime's memory tools
// (search_memory, pin_fact, unpin_fact): MemoryToolsDefault follows the
// runtime's config (memory.tools and the model's memory_tools), while
// MemoryToolsOn and MemoryToolsOff decide for the branch whatever the
// config says. The zero value is MemoryToolsDefault; the text forms are
// "default", "on" and "off".
type MemoryTools string

// The memory tools settings of a branch.
const (
	MemoryToolsDefault MemoryTools = ""
	MemoryToolsOn      MemoryTools = "on"
	MemoryToolsOff     MemoryTools = "off"
)

// ParseMemoryTools returns the setting named s: "default", "on" or
// "off". Any other text fails with an error wrapping ErrUnknownValue
// that quotes it.
func ParseMemoryTools(s string) (MemoryTools, error) {
	switch s {
	case "default":
		return MemoryToolsDefault, nil
	case string(MemoryToolsOn), string(MemoryToolsOff):
		return MemoryTools(s), nil
	}
	return "", fmt.Errorf("%w: memory tools setting %q, want default, on or off", ErrUnknownValue, s)
}

// Valid reports whether m is one of the three settings.
func (m MemoryTools) Valid() bool {
	return m == MemoryToolsDefault || m == MemoryToolsOn || m == MemoryToolsOff
}

// String returns the text form of m: "default", "on", "off", or
// "memory tools(…)" when m is not a setting.
func (m MemoryTools) String() string {
	switch {
	case m == MemoryToolsDefault:
		return "default"
	case m.Valid():
		return string(m)
	}
	return "memory tools(" + strings.ToValidUTF8(string(m), "\uFFFD") + ")"
}

// Resolve returns whether the memory tools are on under m when the
// runtime's config says def.
func (m MemoryTools) Resolve(def bool) bool {
	switch m {
	case MemoryToolsOn:
		return true
	case MemoryToolsOff:
		return false
	}
	return def
}

// MarshalText encodes m; it fails with ErrUnknownValue when m is not a
// setting.
func (m MemoryTools) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("%w: %s", ErrUnknownValue, m)
	}
	return []byte(m.String()), nil
}

// UnmarshalText decodes m (ParseMemoryTools).
func (m *MemoryTools) UnmarshalText(text []byte) error {
	v, err := ParseMemoryTools(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
