package mesh

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/feedmesh/feedmesh/internal/raftnode"
)

// raftDir is where a node keeps its Raft state inside its data dir.
const raftDir = "raft"

// RecoverResult is what Recover did to one node's data dir.
type RecoverResult struct {
	// Name is the node whose data dir it is.
	Name string
	raftnode.RecoverReport
}

// Recover rewrites the Raft configuration in each of dataDirs (data dirs
// of stopped nodes) so that voters, node names, are the only voters: the
// way back when a cluster has lost a majority of its voters for good
// (raftnode.Recover, Consul's peers.json). Empty voters means the nodes of
// dataDirs themselves, the usual case on one machine; survivors on
// several machines each run it on their own data dir with the same voters.
// Started again with their usual command lines, the survivors elect a
// leader among themselves, and the leader grows the voter set again as
// members join.
//
// It refuses a data dir that a running node holds
// (raftnode.ErrDataDirInUse) or that has no Raft state
// (raftnode.ErrNoState), checking every dir before it changes any. On an
// error the results say which dirs were rewritten; running it again with
// the same arguments is safe.
func Recover(dataDirs []string, voters []string, logger *slog.Logger) ([]RecoverResult, error) {
	if len(dataDirs) == 0 {
		return nil, errors.New("no data dir given")
	}
	names := make([]string, len(dataDirs))
	seen := map[string]string{}
	for i, d := range dataDirs {
		name, err := storedName(d)
		if err != nil {
			return nil, err
		}
		if other, ok := seen[name]; ok {
			return nil, fmt.Errorf("%s and %s are both node %q's data dir", other, d, name)
		}
		seen[name] = d
		names[i] = name
	}
	for i, d := range dataDirs {
		name := names[i]
		if err := raftnode.CheckRecoverable(recoverConfig(name, d, logger)); errors.Is(err, raftnode.ErrNoState) {
			return nil, fmt.Errorf("node %s: %w: it was never a voter, or this is not its data dir", name, err)
		} else if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
	}
	if len(voters) == 0 {
		voters = names
	}
	for _, name := range names {
		if !slices.Contains(voters, name) {
			return nil, fmt.Errorf("node %s is not among the voters %v: a survivor whose data dir is given must be one of them", name, voters)
		}
	}
	servers := make([]plan.Server, len(voters))
	for i, v := range voters {
		servers[i] = plan.Server{ID: v}
	}
	var out []RecoverResult
	for i, d := range dataDirs {
		rep, err := raftnode.Recover(recoverConfig(names[i], d, logger), servers)
		if err != nil {
			return out, fmt.Errorf("node %s: %w", names[i], err)
		}
		out = append(out, RecoverResult{Name: names[i], RecoverReport: rep})
	}
	return out, nil
}

func recoverConfig(name, dataDir string, logger *slog.Logger) raftnode.Config {
	cfg := raftnode.DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.Logger = name, filepath.Join(dataDir, raftDir), logger
	return cfg
}

// storedName reads the node name kept in dir, creating nothing.
func storedName(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "node-name"))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return "", fmt.Errorf("data dir %s: %w", dir, serr)
		}
		return "", fmt.Errorf("%s is not a node's data dir (no node-name file)", dir)
	}
	if err != nil {
		return "", fmt.Errorf("read node name in %s: %w", dir, err)
	}
	name := string(bytes.TrimSpace(b))
	if !validName.MatchString(name) {
		return "", fmt.Errorf("%s: node name %q is not valid", filepath.Join(dir, "node-name"), name)
	}
	return name, nil
}
