package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/transport"
)

func init() {
	register(cli.Command{Name: "members", Summary: "list the cluster's members as a node sees them", Run: runMembers})
	register(cli.Command{Name: "status", Summary: "show a node's view of the Raft group (leader, term, voters)", Run: runStatus})
}

// clientFlags are the flags every command that talks to a node shares.
type clientFlags struct {
	addr                   *string
	jsonOut                *bool
	timeout                *time.Duration
	tlsCA, tlsCert, tlsKey *string
	token                  *string
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := addConnFlags(fs)
	cf.jsonOut = fs.Bool("json", false, "print JSON instead of a table")
	return cf
}

// addConnFlags adds the flags that reach a node (all of clientFlags but
// --json, for commands whose --json means something of their own).
func addConnFlags(fs *flag.FlagSet) *clientFlags {
	return &clientFlags{
		addr:    fs.String("addr", "127.0.0.1:7947", "QUIC address (host:port) of any node"),
		timeout: fs.Duration("timeout", 10*time.Second, "how long to wait for the answer"),
		tlsCA:   fs.String("tls-ca", "", "CA certificate to verify the node (default: dev mode, not verified)"),
		tlsCert: fs.String("tls-cert", "", "client certificate for mutual TLS"),
		tlsKey:  fs.String("tls-key", "", "client key for mutual TLS"),
		token:   fs.String("token", "", "access token (feedmesh token create): act as its principal, its tenant's (docs/operating/security.md, \"Tokens\")"),
	}
}

// dial connects a client to the node at --addr with the TLS flags, within
// --timeout; o's TLS and RequestTimeout are set from the flags.
func (f *clientFlags) dial(ctx context.Context, o client.Options) (*client.Client, error) {
	tlsConf, err := transport.ClientTLS(*f.tlsCA, *f.tlsCert, *f.tlsKey)
	if err != nil {
		return nil, err
	}
	o.TLS = tlsConf
	if o.Token == "" {
		o.Token = *f.token
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = *f.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, *f.timeout)
	defer cancel()
	return client.Dial(ctx, *f.addr, o)
}

// queryNode parses the flags every node-querying command shares, dials the
// node and runs call within the --timeout.
func queryNode[T any](ctx context.Context, name, synopsis string, args []string, stderr io.Writer,
	call func(*client.Client, context.Context) (T, error)) (T, *clientFlags, error) {
	var zero T
	fs := prog.NewFlagSet(name, synopsis, stderr)
	cf := addClientFlags(fs)
	if err := parseWithEnv(fs, args); err != nil {
		return zero, nil, err
	}
	var v T
	err := cf.with(ctx, func(c *client.Client, ctx context.Context) (err error) {
		v, err = call(c, ctx)
		return err
	})
	return v, cf, err
}

// with dials the node at --addr and runs call within the --timeout,
// closing the client after.
func (f *clientFlags) with(ctx context.Context, call func(*client.Client, context.Context) error) error {
	c, err := f.dial(ctx, client.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, *f.timeout)
	defer cancel()
	return call(c, ctx)
}

func runMembers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ms, cf, err := queryNode(ctx, "members", "[--addr host:port] [--json]", args, stderr, (*client.Client).Members)
	if err != nil {
		return err
	}
	if *cf.jsonOut {
		for _, m := range ms {
			if err := cli.WriteJSON(stdout, m); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tRAFT\tADDR\tGOSSIP\tVERSION")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Status, m.Raft, m.Addr, m.GossipAddr, m.Version)
	}
	return tw.Flush()
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, cf, err := queryNode(ctx, "status", "[--addr host:port] [--json]", args, stderr, (*client.Client).Status)
	if err != nil {
		return err
	}
	if *cf.jsonOut {
		return cli.WriteJSON(stdout, s)
	}
	printStatus(stdout, s)
	return nil
}

func printStatus(w io.Writer, s api.Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	leader := s.Leader
	if leader == "" {
		leader = "(none known)"
	} else {
		leader += " " + s.LeaderAddr
	}
	fmt.Fprintf(tw, "node:\t%s (%s, version %s)\n", s.Name, s.Addr, s.Version)
	fmt.Fprintf(tw, "role:\t%s (raft state %s)\n", s.Role, s.State)
	fmt.Fprintf(tw, "leader:\t%s\n", leader)
	fmt.Fprintf(tw, "term:\t%d\n", s.Term)
	if s.Protocol > 0 {
		fmt.Fprintf(tw, "protocol:\t%d (the least the Raft servers speak; this node's release speaks %d)\n", s.Protocol, fsm.Protocol)
	}
	fmt.Fprintf(tw, "commit index:\t%d (applied %d, last log %d)\n", s.CommitIndex, s.AppliedIndex, s.LastLogIndex)
	fmt.Fprintf(tw, "voters:\t")
	for i, v := range s.Voters {
		if i > 0 {
			fmt.Fprint(tw, ", ")
		}
		fmt.Fprintf(tw, "%s (%s)", v.ID, v.Addr)
	}
	fmt.Fprintf(tw, "\nmembers:\t%d alive of %d known\n", s.AliveMembers, s.Members)
	fmt.Fprintf(tw, "share window:\t%.0f MiB per dataset shared on this worker\n", float64(s.ShareWindowBytes)/(1<<20))
	fmt.Fprintf(tw, "nodes wanted:\t%d by the jobs (this node's replica), %d worker nodes alive\n", s.NodesWanted, s.WorkerNodes)
	tw.Flush()
}
