package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// presignedMagic starts the footer of a presigned requests file.
const presignedMagic = "webhookd-presigned"

// WriteRequests writes n signed requests for an outside generator (wrk
// with docs/wrk/presigned.lua) to w: each a new event id, with the body
// (bodySize bytes), signature and id the in-process generator would send
// for src, signed now. A generator's Lua has no HMAC, hence presigning;
// the requests must be sent within the scheme's timestamp tolerance
// (verify.DefaultTolerance for most).
//
// The format lets each wrk thread read only its share. It is the raw
// HTTP/1.1 requests back to back, then a table of n+1 byte offsets into
// them (each 16 decimal digits and a newline: request i spans offsets i
// to i+1), then a footer line: "webhookd-presigned", n and the table's
// offset, each number 16 digits, space-separated.
func WriteRequests(ctx context.Context, w io.Writer, src Source, n int, bodySize int) error {
	if n <= 0 {
		return errors.New("loadgen: the number of requests must be positive")
	}
	src = src.withDefaults()
	b := newBook(randomHex(4), 0)
	bw := bufio.NewWriterSize(w, 1<<20)
	offsets := make([]int64, 0, n+1)
	var at int64
	var req []byte
	now := time.Now()
	for i := range n {
		if i%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		id := b.id(pick{n: int64(i)})
		body := makeBody(id, int64(i), bodySize)
		header, rawQuery, err := src.sign(id, body, now)
		if err != nil {
			return err
		}
		req = appendRawRequest(req[:0], "/webhooks/"+src.Name, rawQuery, header, body)
		offsets = append(offsets, at)
		if _, err := bw.Write(req); err != nil {
			return fmt.Errorf("error writing requests: %w", err)
		}
		at += int64(len(req))
	}
	offsets = append(offsets, at)
	var line []byte
	for _, off := range offsets {
		line = appendDigits16(line[:0], off)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("error writing requests: %w", err)
		}
	}
	line = append([]byte(presignedMagic+" "), appendDigits16(nil, int64(n))...)
	line = append(append(line, ' '), appendDigits16(nil, at)...)
	line = append(line, '\n')
	if _, err := bw.Write(line); err != nil {
		return fmt.Errorf("error writing requests: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("error writing requests: %w", err)
	}
	return nil
}

// appendRawRequest appends an HTTP/1.1 POST of body to path with the
// signed headers, as wrk sends it unchanged.
func appendRawRequest(b []byte, path, rawQuery string, header http.Header, body []byte) []byte {
	b = append(b, "POST "...)
	b = append(b, path...)
	if rawQuery != "" {
		b = append(b, '?')
		b = append(b, rawQuery...)
	}
	b = append(b, " HTTP/1.1\r\nHost: webhookd-bench\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n"...)
	for _, name := range slices.Sorted(maps.Keys(header)) {
		for _, v := range header[name] {
			b = append(b, name...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// appendDigits16 appends n as 16 decimal digits, zero-padded.
func appendDigits16(b []byte, n int64) []byte {
	s := strconv.FormatInt(n, 10)
	for range 16 - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}
