// Package cli is what feedmesh's two binaries (cmd/feedmesh, the product,
// and cmd/feedmesh-bench, the benchmarks) share: a program made of
// subcommands that register themselves in init, its usage text and exit
// codes, and flag parsing that reports errors instead of exiting.
//
// Exit codes: 0 done (or --help), 1 the subcommand failed (its error is
// printed as "<program> <subcommand>: <error>"), 2 a usage error (unknown
// subcommand, bad flags, no subcommand, or an error the subcommand marked
// with InputError: a flag's value or a file it names that cannot be used).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

// ErrUsage marks an error already explained by a usage text: the program
// exits 2 without printing it again.
var ErrUsage = errors.New("usage")

// InputError marks err as the command line's fault (a flag value that
// cannot be used together with the others, a file a flag names that is
// missing or invalid): the program prints it like any error but exits 2.
// errors.Is and errors.As see through it to err.
func InputError(err error) error {
	if err == nil {
		return nil
	}
	return &inputError{err}
}

type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string
	// Run parses args (without the subcommand's name) and does the work. It
	// writes normal output to stdout and diagnostics to stderr.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// Nested lists the command's own subcommands that have flags of their
	// own, as the words that follow its name ("ca create"), for Help and
	// Reference.
	Nested []string
}

// Program is a binary made of subcommands.
type Program struct {
	// Name is the binary's name, as usage and errors spell it.
	Name string
	// About is the first line of the usage text.
	About string
	// Noun names a subcommand in the usage text ("command", "benchmark"),
	// and Arg stands for one in its synopsis ("<command>", "<name>").
	Noun, Arg string
	// Footer, if set, ends the usage text.
	Footer string
	// Moved answers subcommands that moved elsewhere: the message is
	// printed and the program exits 2.
	Moved map[string]string
	// StopGrace, if set, bounds how long Main lets the subcommand run after
	// SIGINT or SIGTERM (its context is cancelled at once): past it, or at
	// a second signal, the program says so on stderr and exits 1 without
	// its cleanup. Subcommands must return on their own well within it;
	// this is the backstop for one that does not (feedmesh-bench: a
	// benchmark forming a large cluster once ignored SIGTERM for minutes).
	// 0: no bound (the feedmesh node drains for as long as it is told to).
	StopGrace time.Duration

	commands map[string]Command
}

// Register adds c; each subcommand registers itself in its file's init.
func (p *Program) Register(c Command) {
	if p.commands == nil {
		p.commands = map[string]Command{}
	}
	if _, dup := p.commands[c.Name]; dup {
		panic(p.Name + ": " + p.Noun + " registered twice: " + c.Name)
	}
	p.commands[c.Name] = c
}

// Lookup returns the subcommand called name.
func (p *Program) Lookup(name string) (Command, bool) {
	c, ok := p.commands[name]
	return c, ok
}

// Names lists the subcommands, sorted.
func (p *Program) Names() []string {
	names := make([]string, 0, len(p.commands))
	for n := range p.commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Main runs the subcommand os.Args names, with a context that ends on
// SIGINT or SIGTERM, and exits with its code.
func (p *Program) Main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-sigs:
		case <-done:
			return
		}
		cancel()
		if p.StopGrace <= 0 {
			return
		}
		t := time.NewTimer(p.StopGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-sigs:
		case <-done:
			return
		}
		fmt.Fprintf(os.Stderr, "%s: still running %s after the signal (or signalled twice): exiting without cleaning up\n", p.Name, p.StopGrace)
		os.Exit(1)
	}()
	code := p.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	close(done)
	<-exited
	signal.Stop(sigs)
	cancel()
	os.Exit(code)
}

// Run runs the subcommand args[0] names and returns the exit code.
func (p *Program) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		p.Usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := p.commands[args[0]]
	if !ok {
		if msg, moved := p.Moved[args[0]]; moved {
			fmt.Fprintln(stderr, msg)
			return 2
		}
		fmt.Fprintf(stderr, "%s: unknown %s %q\n\n", p.Name, p.Noun, args[0])
		p.Usage(stderr)
		return 2
	}
	if err := c.Run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, ErrUsage) {
			return 2
		}
		fmt.Fprintf(stderr, "%s %s: %v\n", p.Name, c.Name, err)
		var in *inputError
		if errors.As(err, &in) {
			return 2
		}
		return 1
	}
	return 0
}

// Usage lists the subcommands.
func (p *Program) Usage(w io.Writer) {
	fmt.Fprintln(w, p.About)
	fmt.Fprintf(w, "\nUsage: %s %s [flags]   (%s %s --help for its flags)\n", p.Name, p.Arg, p.Name, p.Arg)
	fmt.Fprintf(w, "\n%ss:\n", strings.ToUpper(p.Noun[:1])+p.Noun[1:])
	names := p.Names()
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, p.commands[n].Summary)
	}
	if p.Footer != "" {
		fmt.Fprintln(w, "\n"+p.Footer)
	}
}

// NewFlagSet returns a flag set for the subcommand name that reports errors
// instead of exiting and prints its usage to stderr. Help sees every flag
// set a command makes through it.
func (p *Program) NewFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(p.Name+" "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if rec, ok := stderr.(*flagRecorder); ok {
		rec.sets = append(rec.sets, fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s %s %s\n\nFlags:\n", p.Name, name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// ParseFlags parses args, mapping flag errors to ErrUsage (the flag package
// has printed them) and refusing arguments left over.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return ErrUsage
	}
	return nil
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// WriteJSON writes v as one line of JSON.
func WriteJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
