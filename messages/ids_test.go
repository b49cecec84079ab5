package messages

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestNewIDIsMonotonic(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	prev := NewID[TurnID](now)
	for i := range 10_000 {
		id := NewID[TurnID](now) // same millisecond: ordered by the counter
		if id.Compare(prev) <= 0 {
			t.Fatalf("NewID #%d = %s, not after %s", i, id, prev)
		}
		prev = id
	}
	if got := prev.Time(); !got.Equal(now) {
		t.Fatalf("Time() = %v, want %v", got, now)
	}
}

func TestIDText(t *testing.T) {
	id := NewID[BranchID](time.UnixMilli(1_700_000_000_000))
	tests := []struct {
		in      string
		want    BranchID
		wantErr bool
	}{
		{id.String(), id, false},
		{"", BranchID{}, false},
		{"not-a-ulid", BranchID{}, true},
		{"01ARZ3NDEKTSV4RRFFQ69G5FA", BranchID{}, true},  // 25 characters
		{"81ARZ3NDEKTSV4RRFFQ69G5FAV", BranchID{}, true}, // overflows 128 bits
		{"01ARZ3NDEKTSV4RRFFQ69G5FA!", BranchID{}, true}, // bad character
	}
	for _, tt := range tests {
		var got BranchID
		err := got.UnmarshalText([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("UnmarshalText(%q) = %s, %v; want %s, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, ErrInvalidID) {
			t.Errorf("UnmarshalText(%q) error %v is not ErrInvalidID", tt.in, err)
		}
	}
	// IDs are JSON strings; the zero ID is "".
	b, err := json.Marshal(struct{ A, B TurnID }{A: NewID[TurnID](time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	var back struct{ A, B TurnID }
	if err := json.Unmarshal(b, &back); err != nil || back.A.IsZero() || !back.B.IsZero() {
		t.Fatalf("JSON round trip of %s = %+v, %v", b, back, err)
	}
	if _, err := IDFromBytes[TurnID]([]byte{1, 2, 3}); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("IDFromBytes(3 bytes) error = %v", err)
	}
}
