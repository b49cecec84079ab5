package retrieval

import (
	"testing"
	"time"
)

func TestParseWhen(t *testing.T) {
	t.Parallel()
	// A Wednesday.
	now := time.Date(2023, 10, 25, 15, 4, 0, 0, time.UTC)
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		q        string
		from, to time.Time // zero: none named
	}{
		{"what did we decide on 2023-05-07?", day(2023, 5, 7), day(2023, 5, 8)},
		{"the release of 2023/5/7", day(2023, 5, 7), day(2023, 5, 8)},
		{"numbers from 2023-05", day(2023, 5, 1), day(2023, 6, 1)},
		{"What did Gina find on 1 February, 2023?", day(2023, 2, 1), day(2023, 2, 2)},
		{"the picture of December 1,2023", day(2023, 12, 1), day(2023, 12, 2)},
		{"what happened on October 13, 2023", day(2023, 10, 13), day(2023, 10, 14)},
		{"the book of 8th December, 2023", day(2023, 12, 8), day(2023, 12, 9)},
		{"on the 7th of May", day(2023, 5, 7), day(2023, 5, 8)},
		{"on Aug 15th", day(2023, 8, 15), day(2023, 8, 16)},
		{"on December 24", day(2022, 12, 24), day(2022, 12, 25)}, // the latest at or before now
		{"a setback in October 2023", day(2023, 10, 1), day(2023, 11, 1)},
		{"what we did in Sept 2021", day(2021, 9, 1), day(2021, 10, 1)},
		{"the trip in May", day(2023, 5, 1), day(2023, 6, 1)},
		{"camping in November", day(2022, 11, 1), day(2022, 12, 1)},
		{"our plans in October", day(2023, 10, 1), day(2023, 11, 1)},
		{"what did I do last October", day(2022, 10, 1), day(2022, 11, 1)},
		{"the deal in December?", day(2022, 12, 1), day(2023, 1, 1)},
		{"Where was John between August 11 and August 15 2023?", day(2023, 8, 11), day(2023, 8, 16)},
		{"the beach in 2022", day(2022, 1, 1), day(2023, 1, 1)},
		{"what did I say today", day(2023, 10, 25), day(2023, 10, 26)},
		{"yesterday's meeting", day(2023, 10, 24), day(2023, 10, 25)},
		{"the day before yesterday", day(2023, 10, 23), day(2023, 10, 24)},
		{"what did we fix last week", day(2023, 10, 16), day(2023, 10, 23)},
		{"this week's plan", day(2023, 10, 23), day(2023, 10, 30)},
		{"over the past week", day(2023, 10, 18), day(2023, 10, 26)},
		{"last weekend", day(2023, 10, 21), day(2023, 10, 23)},
		{"last month", day(2023, 9, 1), day(2023, 10, 1)},
		{"this month", day(2023, 10, 1), day(2023, 11, 1)},
		{"last year", day(2022, 1, 1), day(2023, 1, 1)},
		{"last Friday", day(2023, 10, 20), day(2023, 10, 21)},
		{"last Wednesday", day(2023, 10, 18), day(2023, 10, 19)},
		{"3 days ago", day(2023, 10, 22), day(2023, 10, 23)},
		{"two weeks ago", day(2023, 10, 8), day(2023, 10, 15)},
		{"a couple of months ago", day(2023, 8, 1), day(2023, 9, 1)},
		{"4 years ago", day(2019, 1, 1), day(2020, 1, 1)},
		// A date wins over a time relative to now: it says when.
		{"What did Joanna finish last Friday on 23 January, 2022?", day(2022, 1, 23), day(2022, 1, 24)},
		// Not times: "may" and "march" as words, a month not written
		// as a name, numbers that are no dates.
		{"May I ask what we decided?", time.Time{}, time.Time{}},
		{"it may rain; they march on", time.Time{}, time.Time{}},
		{"an august gathering", time.Time{}, time.Time{}},
		{"port 8080 and 31 pages", time.Time{}, time.Time{}},
		{"31 February 2023", day(2023, 2, 1), day(2023, 3, 1)}, // no such day: the month stays
	} {
		from, to, ok := ParseWhen(tc.q, now)
		if ok != !tc.from.IsZero() || !from.Equal(tc.from) || !to.Equal(tc.to) {
			t.Errorf("ParseWhen(%q) = %v, %v, %v; want %v, %v", tc.q, from, to, ok, tc.from, tc.to)
		}
	}
	// Without a now, only what names its year is read.
	if _, _, ok := ParseWhen("last week in May", time.Time{}); ok {
		t.Error("ParseWhen without a now read a relative time or a month without a year")
	}
	if from, _, ok := ParseWhen("in May 2023", time.Time{}); !ok || !from.Equal(day(2023, 5, 1)) {
		t.Errorf("ParseWhen(in May 2023) without a now = %v, %v", from, ok)
	}
	// Days are now's location's.
	tokyo := time.FixedZone("JST", 9*3600)
	if from, _, _ := ParseWhen("yesterday", now.In(tokyo)); !from.Equal(time.Date(2023, 10, 25, 0, 0, 0, 0, tokyo)) {
		t.Errorf("yesterday in Tokyo at %v: from %v", now.In(tokyo), from)
	}
}

// What reading a query's time costs a search.
func BenchmarkParseWhen(b *testing.B) {
	now := time.Date(2023, 10, 25, 15, 4, 0, 0, time.UTC)
	for _, q := range []string{"What did Melanie paint on 13 October, 2023 after the trip?", "which host runs the staging database"} {
		b.Run("q="+q[:10], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseWhen(q, now)
			}
		})
	}
}
