package messages

import "errors"

// ErrInvalidMessage is returned when a message cannot be encoded or
// decoded. Errors in its blocks wrap ErrInvalidBlock as well.
var ErrInvalidMessage = errors.New("messages: invalid message")

// Role is who wrote a message. The zero Role is invalid. It encodes as
// "user" or "assistant".
type Role uint8

// The roles.
const (
	RoleUser Role = iota + 1
	RoleAssistant
)

var roles = enum[Role]{"role", []string{
	RoleUser:      "user",
	RoleAssistant: "assistant",
}}

// String returns the text form of r, or "role(N)" when r is invalid.
func (r Role) String() string { return roles.String(r) }

// MarshalText encodes r; it fails with ErrUnknownValue when r is invalid.
func (r Role) MarshalText() ([]byte, error) { return roles.marshal(r) }

// UnmarshalText decodes r; it fails with ErrUnknownValue naming the text
// when it is neither "user" nor "assistant".
func (r *Role) UnmarshalText(text []byte) error { return roles.unmarshal(r, text) }

// Message is one message of a conversation (SRD §5.2): its structured
// blocks and RenderedText, the text a reader sees (see Blocks.RenderedText).
// It encodes as
//
//	{"role":"user","blocks":[…],"rendered_text":"…"}
//
// with blocks written as by Blocks.MarshalJSON; as there, call MarshalJSON
// directly to keep raw values byte for byte. Decoding takes rendered_text
// as stored, without recomputing it.
type Message struct {
	Role         Role
	Blocks       Blocks
	RenderedText string
}

// NewMessage returns a message of role made of blocks, with RenderedText
// computed from them.
func NewMessage(role Role, blocks ...ContentBlock) Message {
	return Message{Role: role, Blocks: blocks, RenderedText: Blocks(blocks).RenderedText()}
}

// MarshalJSON encodes m. It fails when m.Role is invalid or a block cannot
// be encoded.
func (m Message) MarshalJSON() ([]byte, error) {
	w := newWriter(scope{sentinel: ErrInvalidMessage})
	role, err := m.Role.MarshalText()
	if err != nil {
		return nil, w.errorf("role", "is invalid: %w", err)
	}
	w.str("role", string(role))
	w.blocks("blocks", m.Blocks)
	w.str("rendered_text", m.RenderedText)
	return w.finish()
}

// UnmarshalJSON decodes m; null leaves m alone. The role is required and
// must be "user" or "assistant".
func (m *Message) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	r, err := readObject(scope{sentinel: ErrInvalidMessage}, data)
	if err != nil {
		return err
	}
	var v Message
	if role := r.required("role"); r.err == nil {
		if err := v.Role.UnmarshalText([]byte(role)); err != nil {
			return r.errorf("role", "is invalid: %w", err)
		}
	}
	v.Blocks = r.blocks("blocks")
	v.RenderedText = r.str("rendered_text")
	if r.err != nil {
		return r.err
	}
	*m = v
	return nil
}
