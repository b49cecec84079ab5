package messages

import (
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

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
//
// A message may say who said it and when (an imported conversation's
// participants and times): "speaker" and "time" follow rendered_text, and
// only when set, so a message without them encodes as it always has.
type Message struct {
	Role         Role
	Blocks       Blocks
	RenderedText string
	// Speaker is the name of the participant who said it, when the
	// conversation it comes from names one ("" when not: the role
	// says who). At most MaxSpeakerBytes, printable, no line breaks.
	Speaker string
	// Time is when it was said, when the conversation it comes from
	// says (zero when not: its turn's time stands for it). It encodes
	// as RFC 3339 with its offset, to the nanosecond it holds.
	Time time.Time
}

// MaxSpeakerBytes bounds Message.Speaker.
const MaxSpeakerBytes = 256

// CheckSpeaker reports what is wrong with s as a Message's Speaker: over
// MaxSpeakerBytes, not UTF-8, or holding a control character (a line
// break among them); "" is fine.
func CheckSpeaker(s string) error {
	switch {
	case len(s) > MaxSpeakerBytes:
		return fmt.Errorf("%d bytes, limit %d", len(s), MaxSpeakerBytes)
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("holds control character %U", r)
		}
	}
	return nil
}

// CheckTime reports what is wrong with t as a Message's Time: RFC 3339
// writes years 0 to 9999 only; the zero time is fine (none).
func CheckTime(t time.Time) error {
	if y := t.Year(); !t.IsZero() && (y < 0 || y > 9999) {
		return fmt.Errorf("year %d, want 0 to 9999 (RFC 3339)", y)
	}
	return nil
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
	if m.Speaker != "" {
		if err := CheckSpeaker(m.Speaker); err != nil {
			return nil, w.errorf("speaker", "is invalid: %w", err)
		}
		w.str("speaker", m.Speaker)
	}
	if !m.Time.IsZero() {
		if err := CheckTime(m.Time); err != nil {
			return nil, w.errorf("time", "is invalid: %w", err)
		}
		w.str("time", m.Time.Format(time.RFC3339Nano))
	}
	return w.finish()
}

// UnmarshalJSON decodes m; null leaves m alone. The role is required and
// must be "user" or "assistant"; speaker, if any, passes CheckSpeaker, and
// time, if any, is an RFC 3339 time.
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
	if v.Speaker = r.str("speaker"); r.err == nil {
		if err := CheckSpeaker(v.Speaker); err != nil {
			return r.errorf("speaker", "is invalid: %w", err)
		}
	}
	if t := r.str("time"); t != "" && r.err == nil {
		var err error
		if v.Time, err = time.Parse(time.RFC3339, t); err != nil {
			return r.errorf("time", "is invalid: %q is not an RFC 3339 time (2023-05-08T13:56:00Z)", t)
		}
	}
	if r.err != nil {
		return r.err
	}
	*m = v
	return nil
}
