package loadgen

import (
	"bufio"
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// TestServe starts the server-only mode, sends it requests that
// WriteRequests presigned (each new id once, some again) with net/http as
// an outside generator would, and checks that they are accepted (202,
// then 200 for the repeats) and that the report counts what the database
// saw: acks are the 2xx answers, new rows the distinct ids, and the run
// ends when the client's connections close.
func TestServe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		givenNaive bool
		givenNoWkr bool
	}{
		{name: "webhookd with worker"},
		{name: "naive without worker", givenNaive: true, givenNoWkr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			schema := pgtest.New(t)
			rdb := redistest.New(t)
			log := slog.New(slog.NewTextHandler(logtest.Writer{TB: t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
			src, err := BenchSource("stripe")
			if err != nil {
				t.Fatal(err)
			}
			const distinct, repeated = 60, 15
			var file bytes.Buffer
			if err := WriteRequests(t.Context(), &file, src, distinct, 512); err != nil {
				t.Fatal(err)
			}
			raws := readPresigned(t, file.Bytes(), distinct)

			ready := make(chan string, 1)
			type result struct {
				rep *Report
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := Serve(t.Context(), Config{
					Listen: "127.0.0.1:0", BodySize: 512, Source: &src,
					DatabaseURL: schema.URL, RedisURL: rdb.URL, Queue: rdb.Queue,
					Naive: tc.givenNaive, NoWorker: tc.givenNoWkr, DrainTimeout: time.Minute, Log: log,
				}, func(baseURL string) { ready <- baseURL })
				done <- result{rep, err}
			}()
			var base string
			select {
			case base = <-ready:
			case r := <-done:
				t.Fatalf("Serve ended before it was ready: %v", r.err)
			}

			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 30 * time.Second}
			codes := map[int]int{}
			for i := range distinct + repeated {
				codes[send(t, client, base, raws[i%distinct])]++
			}
			client.CloseIdleConnections()
			if codes[http.StatusAccepted] != distinct || codes[http.StatusOK] != repeated {
				t.Fatalf("answers %v, want %d × 202 and %d × 200", codes, distinct, repeated)
			}

			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			rep := r.rep
			if !rep.Check.Passed {
				t.Fatalf("check failed: %v", rep.Check.Problems)
			}
			if rep.Acks != distinct+repeated || rep.Check.NewRows != distinct {
				t.Errorf("acks %d, new rows %d; want %d and %d", rep.Acks, rep.Check.NewRows, distinct+repeated, distinct)
			}
			if rep.Loop != LoopExternal || !strings.Contains(rep.Mode, "server only") {
				t.Errorf("loop %q, mode %q; want the server-only mode said", rep.Loop, rep.Mode)
			}
			if rep.SendSeconds <= 0 || rep.SendSeconds > 60 || rep.AckRate <= 0 || len(rep.CPU.Groups) == 0 {
				t.Errorf("window %.2fs, ack rate %.1f, cpu %+v", rep.SendSeconds, rep.AckRate, rep.CPU)
			}
			if tc.givenNoWkr {
				if rep.EndToEnd.Measured {
					t.Errorf("end to end measured without a worker: %+v", rep.EndToEnd)
				}
			} else if e := rep.EndToEnd; !e.Drained || e.Delivered != distinct || rep.Check.SinkKeys != distinct {
				t.Errorf("end to end %+v, sink keys %d; want %d delivered once", e, rep.Check.SinkKeys, distinct)
			}
			var b strings.Builder
			if err := rep.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", b.String())
		})
	}
}

// readPresigned splits a file WriteRequests wrote into its n raw
// requests, checking the footer and the offset table.
func readPresigned(t *testing.T, data []byte, n int) [][]byte {
	t.Helper()
	nl := bytes.LastIndexByte(data[:len(data)-1], '\n')
	f := strings.Fields(string(data[nl+1:]))
	if len(f) != 3 || f[0] != presignedMagic || len(f[1]) != 16 || len(f[2]) != 16 {
		t.Fatalf("footer %q", data[nl+1:])
	}
	count, _ := strconv.Atoi(f[1])
	table, _ := strconv.Atoi(f[2])
	if count != n || table+(n+1)*17 != nl+1 {
		t.Fatalf("footer says %d requests, table at %d; want %d, table ending at %d", count, table, n, nl+1)
	}
	offset := func(k int) int {
		v, err := strconv.Atoi(string(data[table+k*17 : table+k*17+16]))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if offset(0) != 0 || offset(n) != table {
		t.Fatalf("offsets from %d to %d, want 0 to %d", offset(0), offset(n), table)
	}
	raws := make([][]byte, n)
	for k := range n {
		raws[k] = data[offset(k):offset(k+1)]
	}
	return raws
}

// send sends one raw request to base with client and returns the status.
func send(t *testing.T, client *http.Client, base string, raw []byte) int {
	t.Helper()
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatalf("a presigned request does not parse: %v", err)
	}
	u, _ := url.Parse(base)
	req.RequestURI, req.URL.Scheme, req.URL.Host = "", "http", u.Host
	req = req.WithContext(t.Context())
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}
