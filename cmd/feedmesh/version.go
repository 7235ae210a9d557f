package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline/fn"
)

func init() {
	register(cli.Command{Name: "version", Summary: "print the version", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := prog.NewFlagSet("version", "", stderr)
		if err := cli.ParseFlags(fs, args); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "feedmesh %s (%s, %s/%s)\n", mesh.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		jpeg, _ := fn.JPEGDecoder()
		fmt.Fprintf(stdout, "JPEG decoder: %s\n", jpeg)
		return nil
	}})
}

// logJPEGDecoder says once, at a node's start, which JPEG decoder its
// decode_image and decode_and_crop use: a warning when it is the pure-Go
// one (several times slower), with why libjpeg-turbo is not used.
func logJPEGDecoder(l *slog.Logger) {
	if desc, fast := fn.JPEGDecoder(); fast {
		l.Info("JPEG decoder", "decoder", desc)
	} else {
		l.Warn("JPEG decoder: no libjpeg-turbo, JPEGs are decoded in pure Go", "decoder", desc)
	}
}
