package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

func testProgram() *Program {
	p := &Program{Name: "prog", About: "prog: a test", Noun: "command", Arg: "<command>", Footer: "see also: other",
		Moved: map[string]string{"old": "prog old: moved to other"}}
	p.Register(Command{Name: "ok", Summary: "succeeds", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := p.NewFlagSet("ok", "[--n N]", stderr)
		n := fs.Int("n", 0, "a number")
		if err := ParseFlags(fs, args); err != nil {
			return err
		}
		_, err := io.WriteString(stdout, strings.Repeat("x", *n))
		return err
	}})
	p.Register(Command{Name: "fails", Summary: "fails", Run: func(context.Context, []string, io.Writer, io.Writer) error {
		return errors.New("boom")
	}})
	p.Register(Command{Name: "badfile", Summary: "rejects its input", Run: func(context.Context, []string, io.Writer, io.Writer) error {
		return fmt.Errorf("reading: %w", InputError(errors.New("--in x: not a valid file")))
	}})
	return p
}

func TestProgramRun(t *testing.T) {
	p := testProgram()
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{nil, 2, "", "Usage: prog <command> [flags]"},
		{[]string{"--help"}, 0, "", "see also: other"},
		{[]string{"ok", "--n", "3"}, 0, "xxx", ""},
		{[]string{"ok", "--help"}, 0, "", "Usage: prog ok [--n N]"},
		{[]string{"ok", "--n", "three"}, 2, "", "invalid value"},
		{[]string{"ok", "extra"}, 2, "", "unexpected arguments: [extra]"},
		{[]string{"fails"}, 1, "", "prog fails: boom"},
		{[]string{"badfile"}, 2, "", "prog badfile: reading: --in x: not a valid file"},
		{[]string{"nope"}, 2, "", `prog: unknown command "nope"`},
		{[]string{"old"}, 2, "", "prog old: moved to other"},
	} {
		var out, errb bytes.Buffer
		code := p.Run(context.Background(), tc.args, &out, &errb)
		if code != tc.code || out.String() != tc.stdout || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want %d, %q, one containing %q", tc.args, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
	if got := p.Names(); !slices.Equal(got, []string{"badfile", "fails", "ok"}) {
		t.Errorf("Names() = %v", got)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	p := testProgram()
	defer func() {
		if recover() == nil {
			t.Fatal("registering a name twice did not panic")
		}
	}()
	p.Register(Command{Name: "ok"})
}

func TestSplitList(t *testing.T) {
	if got := SplitList(" a, ,b,,c "); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("SplitList = %q", got)
	}
	if got := SplitList(""); got != nil {
		t.Fatalf("SplitList(\"\") = %q", got)
	}
}
