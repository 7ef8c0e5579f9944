package cronspec_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/cronspec"
	"github.com/hephaestus-go/hephaestus/internal/puritytest"
)

func TestPurity(t *testing.T) { puritytest.Check(t, "internal/cronspec") }

func mustParse(t *testing.T, tm cronspec.Timing) *cronspec.Spec {
	t.Helper()
	s, err := cronspec.Parse(tm)
	if err != nil {
		t.Fatalf("Parse(%+v): %v", tm, err)
	}
	return s
}

func local(t *testing.T, zone string, y int, mo time.Month, d, h, mi int) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	return time.Date(y, mo, d, h, mi, 0, 0, loc)
}

// fmtTicks writes ticks as wall times with their offset, in zone.
func fmtTicks(ts []time.Time, loc *time.Location) string {
	var b []string
	for _, t := range ts {
		b = append(b, t.In(loc).Format("01-02 15:04 -0700"))
	}
	return strings.Join(b, ", ")
}

// The DST rules: a daily tick in the skipped hour runs once, at the end
// of the gap; one in the repeated hour runs once, at its first
// occurrence. Two zones, both directions.
func TestDST(t *testing.T) {
	for _, tc := range []struct {
		name, zone, cron string
		from             [5]int // y m d h mi, local
		want             string
	}{
		{"new york spring daily 02:30", "America/New_York", "30 2 * * *", [5]int{2026, 3, 7, 12, 0},
			"03-08 03:00 -0400, 03-09 02:30 -0400, 03-10 02:30 -0400"},
		{"new york fall daily 01:30", "America/New_York", "30 1 * * *", [5]int{2026, 10, 31, 12, 0},
			"11-01 01:30 -0400, 11-02 01:30 -0500, 11-03 01:30 -0500"},
		{"berlin spring daily 02:30", "Europe/Berlin", "30 2 * * *", [5]int{2026, 3, 28, 12, 0},
			"03-29 03:00 +0200, 03-30 02:30 +0200, 03-31 02:30 +0200"},
		{"berlin fall daily 02:30", "Europe/Berlin", "30 2 * * *", [5]int{2026, 10, 24, 12, 0},
			"10-25 02:30 +0200, 10-26 02:30 +0100, 10-27 02:30 +0100"},
		// Every 30 minutes across the gap: 02:00 and 02:30 do not exist;
		// they and 03:00 are one tick at 03:00.
		{"new york spring half-hourly", "America/New_York", "*/30 * * * *", [5]int{2026, 3, 8, 1, 0},
			"03-08 01:30 -0500, 03-08 03:00 -0400, 03-08 03:30 -0400"},
		// Every 30 minutes across the repeated hour: 01:00 and 01:30 run
		// once each (first pass), then 02:00 standard time.
		{"new york fall half-hourly", "America/New_York", "*/30 * * * *", [5]int{2026, 11, 1, 0, 30},
			"11-01 01:00 -0400, 11-01 01:30 -0400, 11-01 02:00 -0500, 11-01 02:30 -0500"},
		{"berlin fall hourly", "Europe/Berlin", "0 * * * *", [5]int{2026, 10, 25, 1, 0},
			"10-25 02:00 +0200, 10-25 03:00 +0100, 10-25 04:00 +0100"},
		{"berlin spring hourly", "Europe/Berlin", "0 * * * *", [5]int{2026, 3, 29, 1, 0},
			"03-29 03:00 +0200, 03-29 04:00 +0200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, cronspec.Timing{Cron: tc.cron, TimeZone: tc.zone})
			from := local(t, tc.zone, tc.from[0], time.Month(tc.from[1]), tc.from[2], tc.from[3], tc.from[4])
			n := strings.Count(tc.want, ",") + 1
			if got := fmtTicks(s.NextN(from, n), s.Location()); got != tc.want {
				t.Errorf("ticks after %v:\n got %s\nwant %s", from, got, tc.want)
			}
		})
	}
}

// Starting inside the second pass of a repeated hour does not run that
// hour's ticks again: they ran in the first pass.
func TestDSTSecondPass(t *testing.T) {
	s := mustParse(t, cronspec.Timing{Cron: "30 1 * * *", TimeZone: "America/New_York"})
	// 01:10 EST, the second 01:10 of the night.
	from := time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC)
	got, _ := s.Next(from)
	if want := local(t, "America/New_York", 2026, 11, 2, 1, 30); !got.Equal(want) {
		t.Errorf("Next(%v) = %v, want %v", from, got, want)
	}
}

func TestEvery(t *testing.T) {
	s := mustParse(t, cronspec.Timing{Every: 90 * time.Minute, TimeZone: "Europe/Berlin"})
	from := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)
	got := s.NextN(from, 3)
	want := []time.Time{from.Add(90 * time.Minute), from.Add(180 * time.Minute), from.Add(270 * time.Minute)}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("tick %d: %v, want %v", i, got[i], want[i])
		}
	}
	anchor := time.Date(2026, 1, 1, 0, 7, 0, 0, time.UTC)
	s = mustParse(t, cronspec.Timing{Cron: "@every 1h", Anchor: anchor})
	if got, _ := s.Next(from); !got.Equal(time.Date(2026, 10, 25, 0, 7, 0, 0, time.UTC)) {
		t.Errorf("anchored Next = %v", got)
	}
	if got, _ := s.Next(anchor.Add(-time.Hour)); !got.Equal(anchor) {
		t.Errorf("Next before the anchor = %v, want the anchor", got)
	}
}

func TestSixFieldsAndDescriptors(t *testing.T) {
	from := time.Date(2026, 5, 5, 10, 0, 0, 0, time.UTC)
	for cron, want := range map[string]time.Time{
		"*/15 * * * * *": from.Add(15 * time.Second),
		"@hourly":        from.Add(time.Hour),
		"@daily":         time.Date(2026, 5, 6, 0, 0, 0, 0, time.UTC),
		"0 9 * * MON":    time.Date(2026, 5, 11, 9, 0, 0, 0, time.UTC),
	} {
		s := mustParse(t, cronspec.Timing{Cron: cron})
		if got, _ := s.Next(from); !got.Equal(want) {
			t.Errorf("%q: Next = %v, want %v", cron, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		tm    cronspec.Timing
		field string
	}{
		{cronspec.Timing{}, "cron"},
		{cronspec.Timing{Cron: "* * *"}, "cron"},
		{cronspec.Timing{Cron: "61 * * * *"}, "cron minute field"},
		{cronspec.Timing{Cron: "0 25 * * *"}, "cron hour field"},
		{cronspec.Timing{Cron: "0 0 * 13 *"}, "cron month field"},
		{cronspec.Timing{Cron: "0 0 * * FUNDAY"}, "cron day-of-week field"},
		{cronspec.Timing{Cron: "99 0 0 * * *"}, "cron second field"},
		{cronspec.Timing{Cron: "@fortnightly"}, "cron"},
		{cronspec.Timing{Cron: "@every soon"}, "cron"},
		{cronspec.Timing{Cron: "TZ=UTC 0 * * * *"}, "cron"},
		{cronspec.Timing{Cron: "0 * * * *", Every: time.Hour}, "every"},
		{cronspec.Timing{Every: time.Millisecond}, "every"},
		{cronspec.Timing{Every: 1500 * time.Millisecond}, "every"},
		{cronspec.Timing{Every: time.Hour, TimeZone: "Mars/Olympus"}, "time_zone"},
		{cronspec.Timing{Every: time.Hour, TimeZone: "Local"}, "time_zone"},
	} {
		_, err := cronspec.Parse(tc.tm)
		var e *cronspec.Error
		if !errors.As(err, &e) || !errors.Is(err, cronspec.ErrInvalid) {
			t.Errorf("Parse(%+v) = %v, want a *cronspec.Error", tc.tm, err)
			continue
		}
		if e.Field != tc.field {
			t.Errorf("Parse(%+v): field %q (%v), want %q", tc.tm, e.Field, err, tc.field)
		}
	}
}

func TestJitter(t *testing.T) {
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := cronspec.Jitter("s1", tick, time.Minute)
	if a != cronspec.Jitter("s1", tick, time.Minute) {
		t.Fatal("jitter is not deterministic")
	}
	if a < 0 || a >= time.Minute {
		t.Fatalf("jitter %v out of [0, 1m)", a)
	}
	differs := false
	for i := range 20 {
		if cronspec.Jitter("s1", tick.Add(time.Duration(i)*time.Hour), time.Minute) != a {
			differs = true
		}
	}
	if !differs {
		t.Error("jitter is the same for 20 ticks")
	}
	if cronspec.Jitter("s1", tick, 0) != 0 {
		t.Error("jitter without a maximum")
	}
}

func TestDue(t *testing.T) {
	s := mustParse(t, cronspec.Timing{Every: time.Hour})
	cursor := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := func(n int) time.Time { return cursor.Add(time.Duration(n) * time.Hour) }
	for _, tc := range []struct {
		name string
		now  time.Time
		c    cronspec.CatchUp
		run  []time.Time
	}{
		{"nothing due", h(1).Add(-time.Second), cronspec.CatchUp{Ticks: 1}, nil},
		{"on time", h(1), cronspec.CatchUp{Ticks: 1}, []time.Time{h(1)}},
		{"on time, window 0", h(1).Add(30 * time.Second), cronspec.CatchUp{}, []time.Time{h(1)}},
		{"late, window 0", h(5).Add(30 * time.Minute), cronspec.CatchUp{}, nil},
		{"late, default window", h(5).Add(30 * time.Minute), cronspec.CatchUp{Ticks: 1}, []time.Time{h(5)}},
		{"late, 3 ticks", h(5).Add(30 * time.Minute), cronspec.CatchUp{Ticks: 3}, []time.Time{h(3), h(4), h(5)}},
		{"late, within 2h", h(5).Add(30 * time.Minute), cronspec.CatchUp{Within: 2 * time.Hour}, []time.Time{h(4), h(5)}},
		{"on time after missed, window 1", h(5), cronspec.CatchUp{Ticks: 1}, []time.Time{h(5)}},
		{"on time after missed, window 0", h(5), cronspec.CatchUp{}, []time.Time{h(5)}},
		{"long downtime", h(24 * 365), cronspec.CatchUp{Ticks: 2}, []time.Time{h(24*365 - 1), h(24 * 365)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := cronspec.Due(s, "id", 0, cursor, tc.now, tc.c)
			if fmtTicks(p.Run, time.UTC) != fmtTicks(tc.run, time.UTC) {
				t.Errorf("run %s, want %s", fmtTicks(p.Run, time.UTC), fmtTicks(tc.run, time.UTC))
			}
			last := tc.now.Truncate(time.Hour)
			if tc.now.Before(h(1)) {
				last = time.Time{}
			}
			if !p.Last.Equal(last) {
				t.Errorf("last %v, want %v", p.Last, last)
			}
			if want := tc.now.Truncate(time.Hour).Add(time.Hour); !p.NextTick.Equal(want) || !p.NextFire.Equal(want) {
				t.Errorf("next %v / %v, want %v", p.NextTick, p.NextFire, want)
			}
		})
	}
}

// With jitter, a tick is due at its fire time, not before.
func TestDueJitter(t *testing.T) {
	s := mustParse(t, cronspec.Timing{Every: time.Hour})
	cursor := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := cursor.Add(time.Hour)
	fire := cronspec.Fire("j", tick, 10*time.Minute)
	if fire.Equal(tick) {
		t.Skip("this tick's jitter is zero")
	}
	p := cronspec.Due(s, "j", 10*time.Minute, cursor, fire.Add(-time.Second), cronspec.CatchUp{Ticks: 1})
	if len(p.Run) != 0 || !p.NextFire.Equal(fire) || !p.NextTick.Equal(tick) {
		t.Errorf("before the fire time: %+v", p)
	}
	p = cronspec.Due(s, "j", 10*time.Minute, cursor, fire, cronspec.CatchUp{Ticks: 1})
	if len(p.Run) != 1 || !p.Run[0].Equal(tick) {
		t.Errorf("at the fire time: %+v", p)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"* * * * *", "0 0 1 1 *", "@every 1h", "*/5 1-3 * JAN-MAR MON,FRI", "0 0 0 L * *"} {
		f.Add(s, "Europe/Berlin")
	}
	from := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, cron, zone string) {
		s, err := cronspec.Parse(cronspec.Timing{Cron: cron, TimeZone: zone})
		if err != nil {
			return
		}
		prev := from
		for _, tick := range s.NextN(from, 5) {
			if !tick.After(prev) {
				t.Fatalf("%q: tick %v after %v", cron, tick, prev)
			}
			prev = tick
		}
	})
}
