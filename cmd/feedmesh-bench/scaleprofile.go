package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// cpuByLabel reads a CPU profile (pprof's gzipped protobuf, as
// runtime/pprof writes it) and sums its CPU time by the value of the
// goroutine label key ("" for samples without it). It reads only what it
// needs of the format (profile.proto): sample_type (1), sample (2: value
// 2, label 3 {key 1, str 2}) and string_table (6).
func cpuByLabel(gz []byte, key string) (map[string]time.Duration, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	type sample struct {
		values []uint64
		labels [][2]uint64 // key, str (string table indexes)
	}
	var (
		strs    []string
		types   [][2]uint64 // type, unit
		samples []sample
	)
	fields := func(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
		for len(b) > 0 {
			num, typ, k := protowire.ConsumeTag(b)
			if k < 0 {
				return protowire.ParseError(k)
			}
			b = b[k:]
			var v []byte
			var x uint64
			switch typ {
			case protowire.VarintType:
				x, k = protowire.ConsumeVarint(b)
			case protowire.BytesType:
				v, k = protowire.ConsumeBytes(b)
			default:
				k = protowire.ConsumeFieldValue(num, typ, b)
			}
			if k < 0 {
				return protowire.ParseError(k)
			}
			b = b[k:]
			if err := f(num, typ, v, x); err != nil {
				return err
			}
		}
		return nil
	}
	// varints reads a repeated uint64 field: packed (bytes) or one varint.
	varints := func(typ protowire.Type, v []byte, x uint64, into *[]uint64) error {
		if typ == protowire.VarintType {
			*into = append(*into, x)
			return nil
		}
		for len(v) > 0 {
			y, k := protowire.ConsumeVarint(v)
			if k < 0 {
				return protowire.ParseError(k)
			}
			*into = append(*into, y)
			v = v[k:]
		}
		return nil
	}
	err = fields(raw, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch num {
		case 1: // sample_type
			var t [2]uint64
			err := fields(v, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if num == 1 || num == 2 {
					t[num-1] = x
				}
				return nil
			})
			types = append(types, t)
			return err
		case 2: // sample
			var s sample
			err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch num {
				case 2:
					return varints(typ, v, x, &s.values)
				case 3:
					var l [2]uint64
					err := fields(v, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
						if num == 1 || num == 2 {
							l[num-1] = x
						}
						return nil
					})
					s.labels = append(s.labels, l)
					return err
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 6: // string_table
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	str := func(i uint64) string {
		if i < uint64(len(strs)) {
			return strs[i]
		}
		return ""
	}
	col := -1
	for i, t := range types {
		if str(t[1]) == "nanoseconds" {
			col = i
		}
	}
	if col < 0 {
		return nil, fmt.Errorf("no sample type in nanoseconds (types %v)", types)
	}
	out := map[string]time.Duration{}
	for _, s := range samples {
		if col >= len(s.values) {
			continue
		}
		val := ""
		for _, l := range s.labels {
			if str(l[0]) == key {
				val = str(l[1])
			}
		}
		out[val] += time.Duration(s.values[col])
	}
	return out, nil
}
