package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
)

// read --checkpoint and --resume: an exactly-once DYNAMIC job's
// checkpoint (client.Iterator.Checkpoint) written to a file when the read
// stops, and a job resumed from one (client.JobOptions.Resume).

// checkpointable returns an error that says why a job of options o (as
// the flags set them, normalized) cannot checkpoint or resume, or nil if
// it can.
func checkpointable(flag string, o jobspec.Job) error {
	if o.Sharding() == jobspec.Dynamic && o.Delivery() == jobspec.ExactlyOnce && !o.Share() {
		return nil
	}
	why := fmt.Sprintf("this read is sharding %s", o.Sharding())
	switch {
	case o.Sharding() != jobspec.Dynamic:
	case o.Share():
		why += " with --share (at most once)"
	default:
		why += ", delivery " + o.Delivery()
	}
	return cli.InputError(fmt.Errorf("%s: only exactly-once jobs checkpoint and resume (--sharding dynamic, the default delivery exactly-once, no --share); %s", flag, why))
}

// checkCheckpointPath fails early if the checkpoint could not be written
// to path: its directory must exist, and path must not be a directory.
func checkCheckpointPath(path string) error {
	if st, err := os.Stat(filepath.Dir(path)); err != nil {
		return cli.InputError(fmt.Errorf("--checkpoint %s: %w", path, err))
	} else if !st.IsDir() {
		return cli.InputError(fmt.Errorf("--checkpoint %s: %s is not a directory", path, filepath.Dir(path)))
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return cli.InputError(fmt.Errorf("--checkpoint %s: is a directory", path))
	}
	return nil
}

// readResume reads --resume's file.
func readResume(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, cli.InputError(fmt.Errorf("--resume: %w", err))
	}
	if len(b) == 0 {
		return nil, cli.InputError(fmt.Errorf("--resume %s: %w: the file is empty", path, client.ErrBadCheckpoint))
	}
	return b, nil
}

// resumeError marks a checkpoint the job refused as the command line's
// fault (exit 2), naming the file.
func resumeError(path string, err error) error {
	if errors.Is(err, client.ErrBadCheckpoint) {
		return cli.InputError(fmt.Errorf("--resume %s: %w", path, err))
	}
	return err
}

// writeCheckpoint writes b to path atomically: a temporary file in the
// same directory, synced, then renamed over path.
func writeCheckpoint(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("--checkpoint: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
			err = fmt.Errorf("--checkpoint %s: %w", path, err)
		}
	}()
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}
