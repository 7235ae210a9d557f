package pipeline

import "testing"

// The decoders take user files and, later, specs sent over the network:
// whatever the input, they must return a value or an error, never panic,
// and a spec they accept must survive the canonical round trip.

func fuzzSpec(t *testing.T, s *Spec, err error) {
	if err != nil {
		return
	}
	b, err := s.CanonicalEncoding()
	if err != nil {
		t.Fatalf("valid spec does not encode: %v", err)
	}
	back, err := DecodeCanonical(b)
	if err != nil {
		t.Fatalf("canonical encoding does not decode: %v", err)
	}
	b2, err := back.CanonicalEncoding()
	if err != nil || string(b) != string(b2) {
		t.Fatalf("canonical round trip changed the encoding (%v)", err)
	}
}

func FuzzParseYAML(f *testing.F) {
	f.Add([]byte(yamlSpec))
	f.Add([]byte("source: {range: {stop: 5}}\nops:\n  - take: 3\n  - repeat:\n"))
	f.Add([]byte("source: {synthetic: {kind: text, count: 10}}\nops: [{padded_batch: {size: 2, pad_value: 1.5}}]"))
	f.Add([]byte("source: {files: {paths: [a.csv], format: csv, fields: [{name: x, dtype: int32}]}}"))
	f.Add([]byte("source: {files: {paths: [a.txt], format: lines, encoding: utf8, on_invalid: replace}}"))
	f.Add([]byte("source: {files: {paths: [a.jsonl], format: jsonl, on_invalid: fail}}"))
	f.Add([]byte("source: {files: {paths: [a.txt], format: lines, encoding: bytes}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseYAML(data)
		fuzzSpec(t, s, err)
	})
}

func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(jsonSpec))
	f.Add([]byte(`{"source": {"range": {"stop": 5}}, "ops": [{"take": 3}, {"map": {"fn": "test_add", "args": {"n": 1, "x": [1, 2.5, {"a": null}]}}}]}`))
	f.Add([]byte(`{"source": {"synthetic": {"kind": "image", "count": 4, "encoding": "png"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseJSON(data)
		fuzzSpec(t, s, err)
	})
}

func FuzzDecodeCanonical(f *testing.F) {
	b, _ := builderSpec().CanonicalEncoding()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeCanonical(data)
		fuzzSpec(t, s, err)
	})
}
