package dashboard

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/server"
)

// The throughput chart stacks each bucket's failed runs on its completed
// ones, to a scale that fits the tallest bar, styled by classes only.
func TestThroughputSVG(t *testing.T) {
	start := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	buckets := []server.StatsBucket{
		{Start: start, StatsCounts: server.StatsCounts{Completed: 3, Failed: 1}},
		{Start: start.Add(time.Hour), StatsCounts: server.StatsCounts{}},
		{Start: start.Add(2 * time.Hour), StatsCounts: server.StatsCounts{Completed: 0, Failed: 2}},
	}
	svg := string(throughputSVG(buckets, overviewWindows[1]))
	if strings.Contains(svg, "style=") {
		t.Error("the chart has a style attribute")
	}
	if n := strings.Count(svg, `<g class="bucket"`); n != 3 {
		t.Errorf("%d buckets drawn, want 3", n)
	}
	rect := regexp.MustCompile(`<rect class="bar (completed|failed)" x="[^"]+" y="([^"]+)" width="[^"]+" height="([^"]+)"/>`)
	var bars []string
	heights := map[string][]float64{}
	ys := map[string][]float64{}
	for _, m := range rect.FindAllStringSubmatch(svg, -1) {
		bars = append(bars, m[1])
		y, _ := strconv.ParseFloat(m[2], 64)
		h, _ := strconv.ParseFloat(m[3], 64)
		heights[m[1]] = append(heights[m[1]], h)
		ys[m[1]] = append(ys[m[1]], y)
	}
	if strings.Join(bars, ",") != "completed,failed,failed" {
		t.Fatalf("the bars are %v, want completed,failed (first bucket), failed (third); none for the empty bucket", bars)
	}
	// The scale is 5 (the tallest bar holds 4): 3 completed is 3/5 of
	// the plot's height, 1 failed 1/5, stacked on top.
	plot := chartBase - chartTop
	if c, f := heights["completed"][0], heights["failed"][0]; !near(c, plot*3/5) || !near(f, plot/5) {
		t.Errorf("the first bucket's bars are %v and %v high, want %v and %v", c, f, plot*3/5, plot/5)
	}
	if y := ys["failed"][0]; !near(y, chartBase-plot*4/5) {
		t.Errorf("the first failed bar starts at y=%v, want it on the completed one (%v)", y, chartBase-plot*4/5)
	}
	if y := ys["failed"][1]; !near(y+heights["failed"][1], chartBase) {
		t.Errorf("the third bucket's failed bar does not stand on the baseline: y=%v", y)
	}
	if !strings.Contains(svg, `>5</text>`) || !strings.Contains(svg, "09:00Z") {
		t.Error("the axis does not show the scale 5 and the first bucket's time")
	}
	if empty := string(throughputSVG(nil, overviewWindows[0])); !strings.Contains(empty, "no bucket") {
		t.Errorf("no buckets draw %q", empty)
	}
}

func near(a, b float64) bool { return a-b < 0.11 && b-a < 0.11 }

func TestNiceCeil(t *testing.T) {
	for n, want := range map[int]int{0: 1, 1: 1, 2: 2, 3: 5, 5: 5, 6: 10, 11: 20, 49: 50, 51: 100, 1001: 2000} {
		if got := niceCeil(n); got != want {
			t.Errorf("niceCeil(%d) = %d, want %d", n, got, want)
		}
	}
}
