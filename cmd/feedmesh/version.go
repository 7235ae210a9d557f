package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/feedmesh/feedmesh/mesh"
)

func init() {
	register(command{name: "version", summary: "print the version", run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := newFlagSet("version", "", stderr)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "feedmesh %s (%s, %s/%s)\n", mesh.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	}})
}
