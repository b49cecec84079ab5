package retrieval

import (
	"strings"
	"time"
	"unicode"
)

// Who said a chunk and when: a partition keeps, beside each chunk's
// terms and vector, the time its text was said, the role of the message
// it is from and the name of the participant who said it (when the
// conversation names one). A search filters on them (Filter) and boosts
// the chunks said at a time its query names, or by a participant it
// names (RankOptions.TimeBoost, SpeakerBoost).

// The roles of a chunk's text, as Doc.Role names them.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

var roleCodes = map[string]uint8{RoleUser: 1, RoleAssistant: 2, RoleTool: 3}

// docMeta is a chunk's metadata as a partition holds it.
type docMeta struct {
	time    int64  // Unix milliseconds; 0: not known
	speaker uint32 // 1 + the index of its name in Partition.names; 0: none
	role    uint8  // roleCodes; 0: not known
}

// addMeta records d's metadata; the partition's lock is held.
func (p *Partition) addMeta(d Doc) {
	m := docMeta{time: d.Time, role: roleCodes[d.Role]}
	if m.time == 0 {
		// Entries stored before times were kept: the chunk id begins
		// with its turn's time (actors.ChunkIDFor), as a ULID does.
		m.time = ulidMillis(d.ID)
	}
	if d.Speaker != "" {
		i, ok := p.nameIdx[d.Speaker]
		if !ok {
			p.names = append(p.names, d.Speaker)
			i = uint32(len(p.names))
			p.nameIdx[d.Speaker] = i
		}
		m.speaker = i
	}
	p.meta[d.ID] = m
	if m.time > p.newestTime {
		p.newestTime = m.time
	}
	if m.time > p.seqTime[d.Seq] {
		p.seqTime[d.Seq] = m.time
	}
}

// ulidMillis is the time a ULID-laid id begins with, in Unix
// milliseconds.
func ulidMillis(id DocID) int64 {
	var ms int64
	for _, b := range id[:6] {
		ms = ms<<8 | int64(b)
	}
	return ms
}

// newestTimeUpTo returns the time of the newest chunk of the turns up to
// seq maxSeq (0 if none is known); the lock is held.
func (p *Partition) newestTimeUpTo(maxSeq uint64) int64 {
	if maxSeq >= p.newest {
		return p.newestTime
	}
	var t int64
	for seq, st := range p.seqTime {
		if seq <= maxSeq && st > t {
			t = st
		}
	}
	return t
}

// Speakers returns the names of the participants the partition's chunks
// name, in the order first indexed.
func (p *Partition) Speakers() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return append([]string(nil), p.names...)
}

// Filter keeps, of a search's chunks, those said within [From, To)
// (a zero bound is none) and, when Speaker is set, those said by it: a
// role (RoleUser, RoleAssistant, RoleTool) or a participant's name (as
// its turns gave it, letter case aside). A search applies it as it
// looks, so that it returns up to its count of the chunks it keeps.
type Filter struct {
	From, To time.Time
	Speaker  string
}

// IsZero reports whether f keeps every chunk.
func (f Filter) IsZero() bool { return f.From.IsZero() && f.To.IsZero() && f.Speaker == "" }

// keeps returns the test f makes of the chunks of p (nil when it keeps
// every one); the lock is held while it runs.
func (f Filter) keeps(p *Partition) func(DocID) bool {
	if f.IsZero() {
		return nil
	}
	from, to := int64(-1<<63), int64(1<<63-1)
	if !f.From.IsZero() {
		from = f.From.UnixMilli()
	}
	if !f.To.IsZero() {
		to = f.To.UnixMilli()
	}
	role, byRole := roleCodes[f.Speaker]
	var speaker uint32
	if f.Speaker != "" && !byRole {
		for i, n := range p.names {
			if strings.EqualFold(n, f.Speaker) {
				speaker = uint32(i + 1)
				break
			}
		}
		if speaker == 0 {
			return func(DocID) bool { return false } // no such participant here
		}
	}
	return func(id DocID) bool {
		m := p.meta[id]
		switch {
		case m.time < from || m.time >= to:
			return false
		case byRole && m.role != role:
			return false
		case speaker != 0 && m.speaker != speaker:
			return false
		}
		return true
	}
}

// nameWords are the words of a text for matching names: runs of letters
// and digits, lower-cased (a possessive's "s" is a word of its own, so
// "Caroline's" holds "caroline").
func nameWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// namedSpeakers returns which of names a query with words qw names: a
// name whose words all come in a row in it, or whose first word (its
// given name, two letters or more) does.
func namedSpeakers(qw []string, names []string) []string {
	var out []string
	for _, n := range names {
		nw := nameWords(n)
		if len(nw) == 0 {
			continue
		}
		if containsRun(qw, nw) || (len(nw) > 1 && len([]rune(nw[0])) >= 2 && containsRun(qw, nw[:1])) {
			out = append(out, n)
		}
	}
	return out
}

func containsRun(words, run []string) bool {
	for i := 0; i+len(run) <= len(words); i++ {
		match := true
		for j, w := range run {
			if words[i+j] != w {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// addressedRole is whose turns a query asks about when it names no
// participant, from its pronouns: the user's when "I" is in it ("what
// did I tell you"); else the assistant's when it speaks of "you" other
// than to ask something of it ("what did you tell me", but not "can you
// tell me", "do you remember"); else the user's when it speaks of "me"
// or "my" ("can you remind me of my flight"); "" when none of these.
func addressedRole(qw []string) string {
	you, me := false, false
	for i, w := range qw {
		switch w {
		case "i":
			return RoleUser // the subject
		case "me", "my", "mine", "myself":
			me = true
		case "you", "your", "yours", "yourself":
			if w == "you" && i > 0 && requestWord(qw[i-1], qw[i+1:]) {
				continue
			}
			you = true
		}
	}
	switch {
	case you:
		return RoleAssistant
	case me:
		return RoleUser
	}
	return ""
}

// requestWord reports whether "you" after word before, followed by
// after, asks something of the assistant rather than speaks of what it
// did: "can you", "could you", "would you", "will you", "please, you",
// "do you remember / know / recall".
func requestWord(before string, after []string) bool {
	switch before {
	case "can", "could", "would", "will", "please":
		return true
	case "do":
		return len(after) > 0 && (after[0] == "remember" || after[0] == "know" || after[0] == "recall")
	}
	return false
}

// boosts are what a query's candidates gain by who said them and when.
type boosts struct {
	timed    bool  // the query names a time: [from, to)
	from, to int64 // Unix milliseconds
	time     float64
	// names are the participants the query names (lower case); role,
	// when it names none, whose turns its pronouns ask about.
	names   map[string]bool
	role    uint8
	speaker float64
}

// speakersIn returns which of p's names (their indexes, as docMeta
// holds them) the query names; the lock is held.
func (b boosts) speakersIn(p *Partition) map[uint32]bool {
	if b.names == nil {
		return nil
	}
	out := map[uint32]bool{}
	for i, n := range p.names {
		if b.names[strings.ToLower(n)] {
			out[uint32(i+1)] = true
		}
	}
	return out
}

// boostsOf reads what q names for o's boosts; the scopes' locks are
// held.
func boostsOf(q Query, o RankOptions) boosts {
	var b boosts
	if o.TimeBoost > 0 {
		var now int64
		for _, s := range q.Scopes {
			now = max(now, s.Part.newestTimeUpTo(s.MaxSeq))
		}
		var at time.Time
		if now > 0 {
			at = time.UnixMilli(now).UTC()
		}
		if from, to, ok := ParseWhen(q.Text, at); ok {
			b.timed, b.from, b.to, b.time = true, from.UnixMilli(), to.UnixMilli(), o.TimeBoost
		}
	}
	if o.SpeakerBoost > 0 {
		var names []string
		for _, s := range q.Scopes {
			names = append(names, s.Part.names...)
		}
		qw := nameWords(q.Text)
		if named := namedSpeakers(qw, names); len(named) > 0 {
			b.names = map[string]bool{}
			for _, n := range named {
				b.names[strings.ToLower(n)] = true
			}
			b.speaker = o.SpeakerBoost
		} else if r := addressedRole(qw); r != "" {
			b.role, b.speaker = roleCodes[r], o.SpeakerBoost
		}
	}
	return b
}

func (b boosts) any() bool { return b.time > 0 || b.speaker > 0 }

// inTime reports whether a chunk was said within the time the query
// names.
func (b boosts) inTime(m docMeta) bool { return b.timed && m.time >= b.from && m.time < b.to }

// gain is what a chunk gains by who said it and when: its relevance
// is multiplied by 1 + speaker, then time is added.
type gain struct{ time, speaker float64 }

// of is what a chunk gains, named the speakers of its partition (as
// speakersIn returns them).
func (b boosts) of(named map[uint32]bool, m docMeta) gain {
	var g gain
	if b.inTime(m) {
		g.time = b.time
	}
	switch {
	case named[m.speaker]:
		g.speaker = b.speaker
	case b.role != 0 && m.role == b.role && m.speaker == 0:
		g.speaker = b.speaker
	}
	return g
}

// score is the score of a candidate of relevance rel that gains g.
func (g gain) score(rel float64) float64 { return rel*(1+g.speaker) + g.time }
