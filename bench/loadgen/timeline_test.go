package loadgen

import (
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// checkTimeline asserts what every run's timeline and latency histogram
// must show: readings in time order, cumulative counts that never fall,
// the last reading equal to the report's totals, deliveries only where a
// sink was read, and every answer counted once in the histogram.
func checkTimeline(t *testing.T, rep *Report) {
	t.Helper()
	tl := rep.Timeline
	if len(tl.Samples) < 2 || tl.IntervalSeconds <= 0 {
		t.Fatalf("timeline: %d samples at %.2fs; want at least a first and a last", len(tl.Samples), tl.IntervalSeconds)
	}
	for i := 1; i < len(tl.Samples); i++ {
		prev, cur := tl.Samples[i-1], tl.Samples[i]
		if cur.Seconds < prev.Seconds || cur.Acks < prev.Acks ||
			(cur.Delivered != nil && prev.Delivered != nil && *cur.Delivered < *prev.Delivered) {
			t.Fatalf("timeline goes backwards at sample %d: %+v then %+v", i, prev, cur)
		}
	}
	last := tl.Samples[len(tl.Samples)-1]
	if last.Acks != rep.Acks {
		t.Errorf("timeline ends at %d acks, report has %d", last.Acks, rep.Acks)
	}
	if tl.SendingStoppedSeconds < rep.SendSeconds-0.01 || tl.SendingStoppedSeconds > last.Seconds+0.01 {
		t.Errorf("sending stopped at %.3fs, sent for %.3fs, last sample at %.3fs", tl.SendingStoppedSeconds, rep.SendSeconds, last.Seconds)
	}
	switch {
	case !rep.EndToEnd.Measured && last.Delivered != nil:
		t.Errorf("timeline has deliveries (%d) without a sink read", *last.Delivered)
	case rep.EndToEnd.Measured && (last.Delivered == nil || *last.Delivered != rep.EndToEnd.Delivered):
		t.Errorf("timeline ends at delivered %v, report has %d", last.Delivered, rep.EndToEnd.Delivered)
	}
	var answers, inBins int64
	for _, n := range rep.StatusCodes {
		answers += n
	}
	for i, b := range rep.LatencyHistogram {
		if b.Count <= 0 || b.FromMillis >= b.ToMillis || (i > 0 && b.FromMillis < rep.LatencyHistogram[i-1].ToMillis) {
			t.Fatalf("latency bin %d out of order or empty: %+v", i, rep.LatencyHistogram)
		}
		inBins += b.Count
	}
	if inBins != answers {
		t.Errorf("latency histogram counts %d answers, status codes %d", inBins, answers)
	}
}

// TestLatencyBins folds known latencies into log-spaced bins.
func TestLatencyBins(t *testing.T) {
	t.Parallel()
	h := hdrhistogram.New(1, maxLatencyMicros, 3)
	for _, us := range []int64{1000, 1050, 1100, 5000, 5000, 12000, 90000} {
		_ = h.RecordValue(us)
	}
	got := latencyBins(h)
	want := []LatencyBin{
		{FromMillis: 1, ToMillis: 1.26, Count: 3},
		{FromMillis: 3.98, ToMillis: 5.01, Count: 2},
		{FromMillis: 10, ToMillis: 12.6, Count: 1},
		{FromMillis: 79.4, ToMillis: 100, Count: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("latencyBins = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bin %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
