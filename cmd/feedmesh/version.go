package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh"
)

func init() {
	register(cli.Command{Name: "version", Summary: "print the version", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := prog.NewFlagSet("version", "", stderr)
		if err := cli.ParseFlags(fs, args); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "feedmesh %s (%s, %s/%s)\n", mesh.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	}})
}
