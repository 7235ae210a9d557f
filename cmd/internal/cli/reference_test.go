package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestReference(t *testing.T) {
	p := &Program{Name: "prog", About: "prog: a test", Noun: "command", Arg: "<command>"}
	p.Register(Command{Name: "ok", Summary: "succeeds", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := p.NewFlagSet("ok", "[--n N]", stderr)
		fs.Int("n", 0, "a number")
		return ParseFlags(fs, args)
	}})
	p.Register(Command{Name: "plain", Summary: "takes no flags", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return ParseFlags(p.NewFlagSet("plain", "", stderr), args)
	}})
	p.Register(Command{Name: "group", Summary: "has subcommands", Nested: []string{"make thing"},
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			if len(args) == 1 {
				fmt.Fprintln(stderr, "Usage: prog group make thing [flags]")
				return flag.ErrHelp // a parent without flags of its own
			}
			fs := p.NewFlagSet("group make thing", "--size N", stderr)
			fs.Int("size", 3, "the `N` of things | more (env PROG_SIZE)")
			fs.String("where", "", "a `PATH` <here> with *stars*, see `a|b`")
			return ParseFlags(fs, args[2:])
		}})
	var b strings.Builder
	if err := p.Reference(context.Background(), &b, "Flags", "All of them."); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"# Flags\n\nAll of them.\n",
		"- [`prog group make thing`](#prog-group-make-thing)\n",
		"## prog ok\n\nSucceeds.\n\n```text\nUsage: prog ok [--n N]\n```\n",
		"| `--n int` | `0` |  | a number |\n",
		"## prog group make thing\n\n```text\nUsage: prog group make thing --size N\n```\n",
		"| `--size N` | `3` | `PROG_SIZE` | the N of things \\| more |\n",
		"| `--where PATH` |  |  | a PATH &lt;here&gt; with \\*stars\\*, see `a\\|b` |\n",
		"## prog plain\n\nTakes no flags.\n\n```text\nUsage: prog plain\n```\n\nNo flags.\n",
		"## prog group\n\nHas subcommands.\n\n```text\nUsage: prog group make thing [flags]\n```\n\nNo flags.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("reference lacks %q:\n%s", want, got)
		}
	}
}
