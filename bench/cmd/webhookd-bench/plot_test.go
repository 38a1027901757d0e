package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"image/png"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/webhookd/webhookd/bench/loadgen"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// TestPlot runs the command briefly with --plot and --label and checks
// that it writes a PNG that decodes, that the report carries the label,
// and that the same report draws as an SVG that parses. It asserts
// nothing about what the picture shows.
func TestPlot(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t)
	dir := t.TempDir()
	pngPath := filepath.Join(dir, "run.png")

	var out bytes.Buffer
	cmd := benchCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{
		"-d", "1s", "-c", "2", "--body-size", "256", "--no-progress", "--json",
		"--database-url", benchDatabaseURL(t), "--redis-url", rdb.URL, "--queue", rdb.Queue,
		"--label", "test/plot", "--plot", pngPath,
	})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	var rep loadgen.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the report: %v", err)
	}
	if rep.Label != "test/plot" || len(rep.Timeline.Samples) < 2 || len(rep.LatencyHistogram) == 0 {
		t.Errorf("report: label %q, %d timeline samples, %d latency bins; want the label and both series",
			rep.Label, len(rep.Timeline.Samples), len(rep.LatencyHistogram))
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("--plot wrote no valid PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("PNG is %v", b)
	}

	svgPath := filepath.Join(dir, "run.svg")
	if err := writePlot(svgPath, &rep); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	var root struct{ XMLName xml.Name }
	if err := xml.Unmarshal(svg, &root); err != nil || root.XMLName.Local != "svg" {
		t.Errorf("the SVG does not parse as <svg>: root %q, %v", root.XMLName.Local, err)
	}
}

// TestPlotFormat pins the extensions --plot accepts.
func TestPlotFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		givenPath, expectFormat string
		expectErr               bool
	}{
		{givenPath: "run.png", expectFormat: "png"},
		{givenPath: "dir/Run.SVG", expectFormat: "svg"},
		{givenPath: "run.pdf", expectErr: true},
		{givenPath: "run", expectErr: true},
	} {
		got, err := plotFormat(tc.givenPath)
		if got != tc.expectFormat || (err != nil) != tc.expectErr {
			t.Errorf("plotFormat(%q) = %q, %v; want %q, error %v", tc.givenPath, got, err, tc.expectFormat, tc.expectErr)
		}
	}
}

// benchDatabaseURL is a database of the test's own on the test server,
// which the command creates and drops (in-process runs always start from
// a fresh database).
func benchDatabaseURL(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(pgtest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	u.Path = "/webhookd_bench_test_" + hex.EncodeToString(suffix[:])
	return u.String()
}
