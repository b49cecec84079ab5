package retrieval

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ParseWhen returns the span of time a query names, [from, to), and
// whether it names one: dates ("2023-05-07", "7 May 2023", "May 7th,
// 2023", "the 7th of May"), months ("May 2023", "in May", "2023-05"),
// years ("in 2023"), and times relative to now ("today", "yesterday",
// "last week", "this month", "last year", "last weekend", "last Friday",
// "3 days ago", "two weeks ago"). A date or month without a year is the
// latest one at or before now, or in the year the query names elsewhere.
// When it names several, the span runs from the first to the last. A
// date the query names wins over a relative time it names too ("last
// Friday, on 23 January": the date says when "last Friday" was said).
// Calendar days are now's location's; weeks start on Monday. With now
// zero (no time known), relative times and dates without a year are not
// read. Only English is read.
func ParseWhen(q string, now time.Time) (from, to time.Time, ok bool) {
	loc := time.UTC
	if !now.IsZero() {
		loc = now.Location()
	}
	// Most queries name no time: a look at their words spares them the
	// expressions (a tenth of a millisecond).
	digits, month, rel := false, false, false
	for _, w := range nameWords(q) {
		switch {
		case w[0] >= '0' && w[0] <= '9':
			digits = true
		case monthOf[w] != 0:
			month = true
		case relativeWords[w]:
			rel = true
		}
	}
	p := whenParser{q: q, now: now, loc: loc, used: make([]bool, len(q))}
	if digits || month {
		p.absolute(digits, month)
	}
	if len(p.spans) == 0 && !now.IsZero() && rel {
		p.relative()
	}
	if len(p.spans) == 0 {
		return time.Time{}, time.Time{}, false
	}
	from, to = p.spans[0][0], p.spans[0][1]
	for _, s := range p.spans[1:] {
		if s[0].Before(from) {
			from = s[0]
		}
		if s[1].After(to) {
			to = s[1]
		}
	}
	return from, to, true
}

const monthNames = `january|february|march|april|may|june|july|august|september|october|november|december`

// monthAbbr adds the abbreviations, which are read beside a day or a
// year only ("Mar 7", "Sept 2023"), not alone.
const monthAbbr = monthNames + `|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec`

var (
	reISODay   = regexp.MustCompile(`\b(\d{4})[-/](\d{1,2})[-/](\d{1,2})\b`)
	reISOMonth = regexp.MustCompile(`\b(\d{4})-(\d{2})\b`)
	reMonthDay = regexp.MustCompile(`(?i)\b(` + monthAbbr + `)\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:(?:,\s*|\s+)(\d{4})\b)?`)
	reDayMonth = regexp.MustCompile(`(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(` + monthAbbr + `)\b\.?(?:(?:,\s*|\s+)(\d{4})\b)?`)
	reMonthYr  = regexp.MustCompile(`(?i)\b(` + monthAbbr + `)\.?,?\s+(?:of\s+)?(\d{4})\b`)
	reMonth    = regexp.MustCompile(`(?i)\b(?:(in|during|since|of|early|late|mid|until|till|by|last|this|before|after|around|from|through|throughout)\s+(?:the\s+)?(?:month\s+of\s+)?)?(` + monthNames + `)\b`)
	reYear     = regexp.MustCompile(`\b((?:19|20|21)\d{2})\b`)

	reAgo      = regexp.MustCompile(`(?i)\b(\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a\s+couple\s+of|a\s+few|few|several)\s+(day|week|month|year)s?\s+ago\b`)
	reLast     = regexp.MustCompile(`(?i)\b(last|this|past|previous)\s+(week|weekend|month|year)\b`)
	reWeekday  = regexp.MustCompile(`(?i)\b(?:last|on|this\s+past)\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b`)
	reDayWords = regexp.MustCompile(`(?i)\b(today|tonight|yesterday|the\s+day\s+before\s+yesterday|last\s+night)\b`)
)

var monthOf = func() map[string]time.Month {
	m := map[string]time.Month{"sept": time.September}
	for i, n := range strings.Split(monthNames, "|") {
		m[n] = time.Month(i + 1)
		m[n[:3]] = time.Month(i + 1)
	}
	return m
}()

// relativeWords are the words a relative time holds one of.
var relativeWords = map[string]bool{"today": true, "tonight": true, "yesterday": true, "night": true, "ago": true,
	"week": true, "weeks": true, "weekend": true, "month": true, "months": true, "year": true, "years": true,
	"days": true, "day": true, "monday": true, "tuesday": true, "wednesday": true, "thursday": true, "friday": true,
	"saturday": true, "sunday": true}

var numberWords = map[string]int{"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "few": 3, "several": 3}

type whenParser struct {
	q     string
	now   time.Time
	loc   *time.Location
	used  []bool // the bytes of q read already
	spans [][2]time.Time
}

// take marks q[i:j] read and reports whether none of it was before.
func (p *whenParser) take(i, j int) bool {
	for k := i; k < j; k++ {
		if p.used[k] {
			return false
		}
	}
	for k := i; k < j; k++ {
		p.used[k] = true
	}
	return true
}

func (p *whenParser) add(from, to time.Time) { p.spans = append(p.spans, [2]time.Time{from, to}) }

func (p *whenParser) day(y int, m time.Month, d int) (time.Time, bool) {
	t := time.Date(y, m, d, 0, 0, 0, 0, p.loc)
	if m < 1 || m > 12 || d < 1 || t.Day() != d {
		return time.Time{}, false // 31 February
	}
	return t, true
}

// absolute reads the dates, months and years q names, most precise
// first; a date without a year takes the one q names elsewhere, or the
// latest at or before now.
//
// digits and month say whether q holds a number and a month's name: the
// expressions that need neither are not run.
func (p *whenParser) absolute(digits, month bool) {
	year := 0 // a year the query names, for the dates that name none
	if digits {
		if m := reYear.FindStringSubmatch(p.q); m != nil {
			year, _ = strconv.Atoi(m[1])
		}
	}
	latest := func(m time.Month, d int) (int, bool) { // the year of the latest (m, d) at or before now
		switch {
		case year != 0:
			return year, true
		case p.now.IsZero():
			return 0, false
		}
		y := p.now.Year()
		if t, ok := p.day(y, m, max(d, 1)); ok && t.After(p.now) {
			y--
		}
		return y, true
	}
	if digits {
		for _, m := range reISODay.FindAllStringSubmatchIndex(p.q, -1) {
			y, _ := strconv.Atoi(p.q[m[2]:m[3]])
			mo, _ := strconv.Atoi(p.q[m[4]:m[5]])
			d, _ := strconv.Atoi(p.q[m[6]:m[7]])
			if t, ok := p.day(y, time.Month(mo), d); ok && p.take(m[0], m[1]) {
				p.add(t, t.AddDate(0, 0, 1))
			}
		}
		for _, m := range reISOMonth.FindAllStringSubmatchIndex(p.q, -1) {
			y, _ := strconv.Atoi(p.q[m[2]:m[3]])
			mo, _ := strconv.Atoi(p.q[m[4]:m[5]])
			if t, ok := p.day(y, time.Month(mo), 1); ok && p.take(m[0], m[1]) {
				p.add(t, t.AddDate(0, 1, 0))
			}
		}
	}
	if digits && month {
		dated := func(m []int, mi, di, yi int) {
			mo := monthOf[strings.ToLower(p.q[m[2*mi]:m[2*mi+1]])]
			d, _ := strconv.Atoi(p.q[m[2*di]:m[2*di+1]])
			y, ok := 0, true
			if m[2*yi] >= 0 {
				y, _ = strconv.Atoi(p.q[m[2*yi]:m[2*yi+1]])
			} else if y, ok = latest(mo, d); !ok {
				return
			}
			if t, ok := p.day(y, mo, d); ok && p.take(m[0], m[1]) {
				p.add(t, t.AddDate(0, 0, 1))
			}
		}
		for _, m := range reMonthDay.FindAllStringSubmatchIndex(p.q, -1) {
			dated(m, 1, 2, 3)
		}
		for _, m := range reDayMonth.FindAllStringSubmatchIndex(p.q, -1) {
			dated(m, 2, 1, 3)
		}
		for _, m := range reMonthYr.FindAllStringSubmatchIndex(p.q, -1) {
			mo := monthOf[strings.ToLower(p.q[m[2]:m[3]])]
			y, _ := strconv.Atoi(p.q[m[4]:m[5]])
			if p.take(m[0], m[1]) {
				t := time.Date(y, mo, 1, 0, 0, 0, 0, p.loc)
				p.add(t, t.AddDate(0, 1, 0))
			}
		}
	}
	if month {
		for _, m := range reMonth.FindAllStringSubmatchIndex(p.q, -1) {
			name := p.q[m[4]:m[5]]
			lower := strings.ToLower(name)
			prep := m[2] >= 0
			// A month alone is read when it is written as a name (capital
			// first letter) or after a word that introduces a time; "may"
			// and "march", which are words too, only after such a word.
			if !prep && (name[0] < 'A' || name[0] > 'Z' || lower == "may" || lower == "march") {
				continue
			}
			mo := monthOf[lower]
			y, ok := latest(mo, 1)
			if !ok || !p.take(m[4], m[5]) {
				continue
			}
			if prep && strings.EqualFold(p.q[m[2]:m[3]], "last") && year == 0 && mo == p.now.Month() {
				y-- // "last May" in May: the one before
			}
			t := time.Date(y, mo, 1, 0, 0, 0, 0, p.loc)
			p.add(t, t.AddDate(0, 1, 0))
		}
	}
	if digits {
		for _, m := range reYear.FindAllStringSubmatchIndex(p.q, -1) {
			y, _ := strconv.Atoi(p.q[m[2]:m[3]])
			if p.take(m[0], m[1]) {
				t := time.Date(y, 1, 1, 0, 0, 0, 0, p.loc)
				p.add(t, t.AddDate(1, 0, 0))
			}
		}
	}
}

// relative reads the times q names relative to now.
func (p *whenParser) relative() {
	now := p.now
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, p.loc)
	weekStart := today.AddDate(0, 0, -((int(today.Weekday()) + 6) % 7)) // Monday
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, p.loc)
	yearStart := time.Date(now.Year(), 1, 1, 0, 0, 0, 0, p.loc)
	for _, m := range reDayWords.FindAllStringSubmatchIndex(p.q, -1) {
		if !p.take(m[0], m[1]) {
			continue
		}
		switch w := strings.Join(strings.Fields(strings.ToLower(p.q[m[2]:m[3]])), " "); w {
		case "today", "tonight":
			p.add(today, today.AddDate(0, 0, 1))
		case "yesterday", "last night":
			p.add(today.AddDate(0, 0, -1), today)
		default: // the day before yesterday
			p.add(today.AddDate(0, 0, -2), today.AddDate(0, 0, -1))
		}
	}
	for _, m := range reAgo.FindAllStringSubmatchIndex(p.q, -1) {
		if !p.take(m[0], m[1]) {
			continue
		}
		w := strings.Join(strings.Fields(strings.ToLower(p.q[m[2]:m[3]])), " ")
		n, err := strconv.Atoi(w)
		if err != nil {
			n = numberWords[w]
			if n == 0 {
				n = map[string]int{"a couple of": 2, "a few": 3}[w]
			}
		}
		switch strings.ToLower(p.q[m[4]:m[5]]) {
		case "day":
			d := today.AddDate(0, 0, -n)
			p.add(d, d.AddDate(0, 0, 1))
		case "week":
			d := today.AddDate(0, 0, -7*n)
			p.add(d.AddDate(0, 0, -3), d.AddDate(0, 0, 4))
		case "month":
			d := monthStart.AddDate(0, -n, 0)
			p.add(d, d.AddDate(0, 1, 0))
		case "year":
			d := yearStart.AddDate(-n, 0, 0)
			p.add(d, d.AddDate(1, 0, 0))
		}
	}
	for _, m := range reLast.FindAllStringSubmatchIndex(p.q, -1) {
		if !p.take(m[0], m[1]) {
			continue
		}
		this := strings.EqualFold(p.q[m[2]:m[3]], "this")
		past := strings.EqualFold(p.q[m[2]:m[3]], "past")
		switch strings.ToLower(p.q[m[4]:m[5]]) {
		case "week":
			switch {
			case this:
				p.add(weekStart, weekStart.AddDate(0, 0, 7))
			case past:
				p.add(today.AddDate(0, 0, -7), today.AddDate(0, 0, 1))
			default:
				p.add(weekStart.AddDate(0, 0, -7), weekStart)
			}
		case "weekend":
			sat := weekStart.AddDate(0, 0, 5)
			if !this || sat.After(today) {
				sat = sat.AddDate(0, 0, -7)
			}
			p.add(sat, sat.AddDate(0, 0, 2))
		case "month":
			switch {
			case this:
				p.add(monthStart, monthStart.AddDate(0, 1, 0))
			case past:
				p.add(today.AddDate(0, -1, 0), today.AddDate(0, 0, 1))
			default:
				p.add(monthStart.AddDate(0, -1, 0), monthStart)
			}
		case "year":
			switch {
			case this:
				p.add(yearStart, yearStart.AddDate(1, 0, 0))
			case past:
				p.add(today.AddDate(-1, 0, 0), today.AddDate(0, 0, 1))
			default:
				p.add(yearStart.AddDate(-1, 0, 0), yearStart)
			}
		}
	}
	for _, m := range reWeekday.FindAllStringSubmatchIndex(p.q, -1) {
		if !p.take(m[0], m[1]) {
			continue
		}
		var wd time.Weekday
		for d := time.Sunday; d <= time.Saturday; d++ {
			if strings.EqualFold(d.String(), p.q[m[2]:m[3]]) {
				wd = d
			}
		}
		back := (int(today.Weekday()) - int(wd) + 7) % 7
		if back == 0 {
			back = 7 // "last Friday" on a Friday: a week ago
		}
		d := today.AddDate(0, 0, -back)
		p.add(d, d.AddDate(0, 0, 1))
	}
}
