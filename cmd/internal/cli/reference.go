package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// CommandHelp is what one command's --help shows: its words after the
// program's name ("node", "tls ca create"), its summary, its usage text
// (what --help prints before the flags) and its flags, as the command
// defines them.
type CommandHelp struct {
	Words   []string
	Summary string
	Usage   string
	Flags   []*flag.Flag
}

// Name is the command as typed: "feedmesh tls ca create".
func (h CommandHelp) Name(program string) string {
	return strings.Join(append([]string{program}, h.Words...), " ")
}

// flagRecorder is the stderr Help gives a command: NewFlagSet records
// every flag set made for it, so that the flags come from the command's
// own flag.FlagSet, not from parsing its text.
type flagRecorder struct {
	bytes.Buffer
	sets []*flag.FlagSet
}

// Help runs every command, and each of its Nested subcommands, with
// --help and returns what each shows, in the order of Names (a command's
// nested ones after it). A command must build its flag sets with
// NewFlagSet, passing on the stderr it was given.
func (p *Program) Help(ctx context.Context) ([]CommandHelp, error) {
	var out []CommandHelp
	for _, name := range p.Names() {
		c := p.commands[name]
		paths := [][]string{{name}}
		for _, n := range c.Nested {
			paths = append(paths, append([]string{name}, strings.Fields(n)...))
		}
		for _, words := range paths {
			rec := &flagRecorder{}
			args := append(append([]string(nil), words[1:]...), "--help")
			if err := c.Run(ctx, args, io.Discard, rec); err != nil && !errors.Is(err, flag.ErrHelp) {
				return nil, fmt.Errorf("%s %s --help: %v\n%s", p.Name, strings.Join(words, " "), err, rec.String())
			}
			h := CommandHelp{Words: words, Summary: c.Summary, Usage: rec.String()}
			if len(words) > 1 {
				h.Summary = ""
			}
			if i := strings.Index(h.Usage, "\nFlags:\n"); i >= 0 {
				h.Usage = h.Usage[:i]
			}
			lines := strings.Split(strings.TrimRight(h.Usage, "\n"), "\n")
			for i, l := range lines {
				lines[i] = strings.TrimRight(l, " ")
			}
			h.Usage = strings.Join(lines, "\n")
			for _, fs := range rec.sets {
				fs.VisitAll(func(f *flag.Flag) { h.Flags = append(h.Flags, f) })
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// envPrefix opens the end of a flag's usage that names the environment
// variable that also sets the flag (" (env NAME)"); Reference puts the
// variable in a column of its own.
const envPrefix = " (env "

// Reference writes the program's flag reference in Markdown: a section
// per command (nested ones included) with its summary, its usage and a
// table of its flags (flag, default, environment variable, meaning).
// title and intro open the page. It is generated from what --help shows,
// so it cannot say more than the flags' own help text.
func (p *Program) Reference(ctx context.Context, w io.Writer, title, intro string) error {
	helps, err := p.Help(ctx)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", title)
	if intro != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(intro))
	}
	b.WriteString("Commands:\n\n")
	for _, h := range helps {
		fmt.Fprintf(&b, "- [`%s`](#%s)\n", h.Name(p.Name), strings.Join(append([]string{p.Name}, h.Words...), "-"))
	}
	for _, h := range helps {
		fmt.Fprintf(&b, "\n## %s\n\n", h.Name(p.Name))
		if h.Summary != "" {
			fmt.Fprintf(&b, "%s.\n\n", upperFirst(h.Summary))
		}
		if h.Usage != "" {
			fmt.Fprintf(&b, "```text\n%s\n```\n\n", h.Usage)
		}
		if len(h.Flags) == 0 {
			b.WriteString("No flags.\n")
			continue
		}
		b.WriteString("| flag | default | environment | meaning |\n|---|---|---|---|\n")
		for _, f := range h.Flags {
			arg, usage := flag.UnquoteUsage(f)
			env := ""
			if i := strings.LastIndex(usage, envPrefix); i >= 0 && strings.HasSuffix(usage, ")") {
				env, usage = usage[i+len(envPrefix):len(usage)-1], usage[:i]
			}
			name := "--" + f.Name
			if arg != "" {
				name += " " + arg
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, code(f.DefValue), code(env), cell(usage))
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// code is s as inline code in a table cell ("" for none).
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

// cell is help text as a table cell: one line, with what Markdown would
// take for markup escaped.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", "&lt;", ">", "&gt;", "*", `\*`)
	// Inline code (`...`) stays as written, but for the pipe.
	parts := strings.Split(s, "`")
	for i := range parts {
		if i%2 == 0 || i == len(parts)-1 {
			parts[i] = r.Replace(parts[i])
		} else {
			parts[i] = strings.ReplaceAll(parts[i], "|", `\|`)
		}
	}
	return strings.Join(parts, "`")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
