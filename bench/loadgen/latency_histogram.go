package loadgen

import (
	"math"
	"strconv"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// binsPerDecade is the latency histogram's resolution: ten log-spaced
// bins from 1 ms to 10 ms, as from 10 ms to 100 ms, which keeps the
// report short (a few dozen bins) and each bin about 26% wide.
const binsPerDecade = 10

// LatencyBin is one bin of the ack-latency histogram: Count answers took
// at least FromMillis and less than ToMillis milliseconds.
type LatencyBin struct {
	FromMillis float64 `json:"from_ms"`
	ToMillis   float64 `json:"to_ms"`
	Count      int64   `json:"count"`
}

// latencyBins folds h (microseconds) into log-spaced bins, leaving out
// the empty ones. Bin edges are rounded to three significant digits.
func latencyBins(h *hdrhistogram.Histogram) []LatencyBin {
	var bins []LatencyBin
	for _, b := range h.Distribution() {
		if b.Count == 0 {
			continue
		}
		mid := float64(b.From+b.To) / 2 / 1000
		k := int(math.Floor(binsPerDecade * math.Log10(mid)))
		if n := len(bins); n > 0 && bins[n-1].FromMillis == binEdge(k) {
			bins[n-1].Count += b.Count
			continue
		}
		bins = append(bins, LatencyBin{FromMillis: binEdge(k), ToMillis: binEdge(k + 1), Count: b.Count})
	}
	return bins
}

// binEdge is the lower edge in milliseconds of bin k, 10^(k/binsPerDecade).
func binEdge(k int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(math.Pow(10, float64(k)/binsPerDecade), 'g', 3, 64), 64)
	return v
}
