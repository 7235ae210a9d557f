package main

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
)

// TestJobFlagsSetEveryOption: every field of a job's options
// (jobspec.Options, reflected) has a `read` flag that sets it, and every
// job flag sets one: an option added without its flag fails here. A
// flag is named after the field's JSON name (- for _) unless flagOf says
// otherwise; a field without a flag is in notAFlag, with why.
func TestJobFlagsSetEveryOption(t *testing.T) {
	flagOf := map[string]string{
		"Name":          "job",       // --job NAME
		"NumConsumers":  "consumers", // --coordinated --consumers m
		"ConsumerIndex": "index",     // --coordinated --index i
	}
	notAFlag := map[string]string{
		// --resume names the checkpoint's file, which runRead reads and
		// adds to the normalized options (TestReadCheckpointFlags).
		"Resume": "--resume FILE",
	}
	// samples are values for flags whose type's sample (below) does not
	// parse.
	samples := map[string]string{"Sharding": "static", "Delivery": "at-most-once", "Compression": "lz4", "Offload": "remote", "Workers": "3",
		"Order": "deterministic", "Seed": "7", "SkipBatches": "3:5"}
	sample := func(f reflect.StructField) string {
		if s, ok := samples[f.Name]; ok {
			return s
		}
		switch {
		case f.Type == reflect.TypeOf(time.Duration(0)):
			return "7s"
		case f.Type.Kind() == reflect.Bool:
			return "true"
		case f.Type.Kind() == reflect.Float64:
			return "0.5"
		case f.Type.Kind() == reflect.Int || f.Type.Kind() == reflect.Int64:
			return "3"
		}
		return "x"
	}
	parse := func(args ...string) (reflect.Value, *flag.FlagSet) {
		t.Helper()
		fs := flag.NewFlagSet("read", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		jf := addJobFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		o, err := jf.options()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return reflect.ValueOf(o), fs
	}
	base, fs := parse()
	used := map[string]bool{}
	typ := reflect.TypeOf(jobspec.Options{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		if why, ok := notAFlag[f.Name]; ok {
			t.Logf("%s: no job flag (%s)", f.Name, why)
			continue
		}
		name, ok := flagOf[f.Name]
		if !ok {
			json, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			name = strings.ReplaceAll(json, "_", "-")
		}
		if fs.Lookup(name) == nil {
			t.Errorf("option %s has no `read` flag --%s: add it to jobFlags (cmd/feedmesh/jobflags.go), or to notAFlag here saying why", f.Name, name)
			continue
		}
		used[name] = true
		got, _ := parse("--"+name, sample(f))
		if reflect.DeepEqual(got.Field(i).Interface(), base.Field(i).Interface()) {
			t.Errorf("--%s %s leaves option %s at %v: jobFlags.options does not set it", name, sample(f), f.Name, base.Field(i))
		}
	}
	fs.VisitAll(func(fl *flag.Flag) {
		if !used[fl.Name] {
			t.Errorf("job flag --%s sets no option of jobspec.Options", fl.Name)
		}
	})
}
