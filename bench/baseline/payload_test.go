package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// records renders a payload file of the given records.
func records(recs ...[]byte) []byte {
	var b bytes.Buffer
	for _, r := range recs {
		var hdr [frameHeader]byte
		binary.BigEndian.PutUint64(hdr[:], uint64(len(r)))
		b.Write(hdr[:])
		b.Write(r)
	}
	return b.Bytes()
}

func TestParsePayload(t *testing.T) {
	a, b, c := bytes.Repeat([]byte{1}, 10), bytes.Repeat([]byte{2}, 3000), []byte{3}
	got, err := parsePayload(bytes.NewReader(records(a, b, c)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.records) != 3 || !bytes.Equal(got.records[1], b) || got.max != 3000 {
		t.Fatalf("parsed %d records, max %d", len(got.records), got.max)
	}
	for i, want := range []int{10, 3000, 1, 10, 3000} { // cycles
		if got.size(int64(i)) != want || len(got.at(int64(i))) != want {
			t.Errorf("batch %d: size %d, want %d", i, got.size(int64(i)), want)
		}
	}

	huge := make([]byte, frameHeader)
	binary.BigEndian.PutUint64(huge, maxSize+1)
	zero := make([]byte, frameHeader)
	full := records(a, b)
	for name, tc := range map[string]struct {
		in   []byte
		want string
	}{
		"empty":          {nil, "no record"},
		"short length":   {full[:len(full)-3000-frameHeader+3], "truncated length"},
		"short body":     {full[:len(full)-1], "file ends first"},
		"zero length":    {zero, "announces 0 bytes"},
		"over the limit": {huge, "announces"},
	} {
		_, err := parsePayload(bytes.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

func TestPayloadFlags(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.bin")
	if err := os.WriteFile(path, records([]byte("abc")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"send", "--payload-file", path, "--size", "10"}, "exclude each other"},
		{[]string{"send", "--payload-file", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"send", "--size", "0"}, "--size"},
		{[]string{"recv", "--payload-file", path}, "--addr"},
		{[]string{"send", "extra"}, "unexpected arguments"},
	} {
		err := run(context.Background(), tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestPayloadStream runs a sender and a receiver of each transport in this
// process with records of three sizes and checks the receiver counted the
// records' bytes of the batches it got.
func TestPayloadStream(t *testing.T) {
	recs := [][]byte{bytes.Repeat([]byte{1}, 100), bytes.Repeat([]byte{2}, 70000), bytes.Repeat([]byte{3}, 5)}
	path := filepath.Join(t.TempDir(), "p.bin")
	if err := os.WriteFile(path, records(recs...), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := readPayloadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"grpc-tls", "tcp-tls", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			o := options{transport: tr, listen: "127.0.0.1:0", size: b.max, seconds: 0.2, timeout: 20 * time.Second, payload: path, batches: b}
			pr, pw := io.Pipe()
			type out struct {
				res result
				err error
			}
			sent := make(chan out, 1)
			go func() {
				so := o
				so.role = "send"
				var res result
				var err error
				if tr == "grpc-tls" {
					res, err = grpcSend(ctx, so, pw)
				} else {
					res, err = streamSend(ctx, so, pw)
				}
				pw.Close()
				sent <- out{res, err}
			}()
			var a struct{ Addr string }
			if err := json.NewDecoder(pr).Decode(&a); err != nil {
				t.Fatalf("sender address: %v", err)
			}
			go io.Copy(io.Discard, pr) // nothing more is printed; keep the pipe drained
			ro := o
			ro.role, ro.addr = "recv", a.Addr
			var rres result
			if tr == "grpc-tls" {
				rres, err = grpcRecv(ctx, ro)
			} else {
				rres, err = streamRecv(ctx, ro)
			}
			if err != nil {
				t.Fatalf("receiver: %v", err)
			}
			s := <-sent
			if s.err != nil {
				t.Fatalf("sender: %v", s.err)
			}
			if rres.Batches < 3 || rres.Batches != s.res.Batches-1 {
				t.Fatalf("received %d batches after the first, sender sent %d", rres.Batches, s.res.Batches)
			}
			var want int64
			for i := int64(1); i <= rres.Batches; i++ {
				want += int64(len(recs[i%3]))
			}
			if rres.Bytes != want || s.res.Bytes != want+100 {
				t.Errorf("receiver counted %d bytes, sender %d; want %d and %d", rres.Bytes, s.res.Bytes, want, want+100)
			}
		})
	}
}
