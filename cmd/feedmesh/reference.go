package main

import (
	"bytes"
	"context"
	"io"
	"os"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
)

//go:generate go run . help-reference --out ../../docs/operating/flags.md

func init() {
	register(cli.Command{Name: "help-reference", Summary: "write the flag reference of every command in Markdown (docs/operating/flags.md)", Run: runHelpReference})
}

// referencePath is where the repository keeps the reference, from its root.
const referencePath = "docs/operating/flags.md"

const referenceIntro = `Every flag of every ` + "`feedmesh`" + ` command, as its ` + "`--help`" + ` shows
it. This page is generated: do not edit it, run
` + "`go run ./cmd/feedmesh help-reference --out docs/operating/flags.md`" + `
(or ` + "`go generate ./cmd/feedmesh`" + `) after changing a flag; a test fails
while it is stale.

The flags of ` + "`node`, `members`, `status`, `read`, `jobs` and `top`" + ` also read
an environment variable (the environment column: ` + "`--join`" + ` reads
` + "`FEEDMESH_JOIN`" + `); a flag given on the command line wins. What the
flags do is explained by topic in [the operating guide](README.md) and
[the jobs guide](../jobs/README.md).`

// writeReference writes the reference to w.
func writeReference(ctx context.Context, w io.Writer) error {
	return prog.Reference(ctx, w, "Flag reference", referenceIntro)
}

func runHelpReference(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("help-reference", "[--out FILE]", stderr)
	out := fs.String("out", "", "write the reference to `FILE` instead of stdout (the repository keeps it in "+referencePath+")")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := writeReference(ctx, &b); err != nil {
		return err
	}
	if *out == "" {
		_, err := stdout.Write(b.Bytes())
		return err
	}
	return os.WriteFile(*out, b.Bytes(), 0o644)
}
