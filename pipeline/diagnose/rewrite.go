package diagnose

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/feedmesh/feedmesh/pipeline"
)

// Rewrite returns a copy of spec with plan applied: the maps' new
// parallelism and prefetches (buffer PrefetchBuffer) inserted. spec is not
// modified.
func Rewrite(spec *pipeline.Spec, plan Plan) (*pipeline.Spec, error) {
	if err := checkPlan(spec, plan); err != nil {
		return nil, err
	}
	out := *spec
	out.Ops = nil
	add := func(after int) {
		if slices.Contains(plan.PrefetchAfter, after) {
			out.Ops = append(out.Ops, pipeline.Op{Prefetch: &pipeline.PrefetchOp{Buffer: PrefetchBuffer}})
		}
	}
	add(-1)
	for i, op := range spec.Ops {
		if p, ok := plan.Parallelism[i]; ok {
			m := *op.Map
			m.Parallelism = p
			op.Map = &m
		}
		out.Ops = append(out.Ops, op)
		add(i)
	}
	return &out, nil
}

func checkPlan(spec *pipeline.Spec, plan Plan) error {
	for i, p := range plan.Parallelism {
		if i < 0 || i >= len(spec.Ops) || spec.Ops[i].Map == nil {
			return fmt.Errorf("diagnose: plan sets the parallelism of ops[%d], which is not a map", i)
		}
		if p < 1 || p > pipeline.MaxParallelism {
			return fmt.Errorf("diagnose: plan sets ops[%d] to parallelism %d, outside [1, %d]", i, p, pipeline.MaxParallelism)
		}
	}
	for _, a := range plan.PrefetchAfter {
		if a < -1 || a >= len(spec.Ops) {
			return fmt.Errorf("diagnose: plan inserts a prefetch after ops[%d], which does not exist", a)
		}
	}
	return nil
}

// RewriteYAML applies plan to the text of a spec file (YAML or JSON, which
// YAML reads too) and returns YAML. Everything but the knobs the plan
// changes is kept as written, comments included, except that relPath, if
// not nil, rewrites each files source path (so that a spec written to
// another directory still finds its files). The spec the text holds must
// be the one plan was made for.
func RewriteYAML(src []byte, plan Plan, relPath func(string) string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("diagnose: rewrite spec: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("diagnose: rewrite spec: want a mapping at the top")
	}
	root := doc.Content[0]
	if root.Style&yaml.FlowStyle != 0 {
		blockStyle(root) // JSON: write it as block YAML, one key per line
	}
	if relPath != nil {
		if paths := lookup(lookup(lookup(root, "source"), "files"), "paths"); paths != nil && paths.Kind == yaml.SequenceNode {
			for _, p := range paths.Content {
				if p.Kind == yaml.ScalarNode {
					p.Value = relPath(p.Value)
					p.Style = yaml.DoubleQuotedStyle
				}
			}
		}
	}
	ops := lookup(root, "ops")
	if ops == nil || ops.Kind != yaml.SequenceNode {
		if !plan.Empty() && len(plan.Parallelism) > 0 {
			return nil, fmt.Errorf("diagnose: rewrite spec: no ops list")
		}
		if len(plan.PrefetchAfter) > 0 {
			if ops == nil {
				root.Content = append(root.Content, scalar("ops"), &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"})
				ops = root.Content[len(root.Content)-1]
			} else {
				// `ops:` with nothing after it, or `ops: []` written as null.
				*ops = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			}
		}
	}
	if ops != nil && ops.Kind == yaml.SequenceNode {
		for i, p := range plan.Parallelism {
			if i >= len(ops.Content) {
				return nil, fmt.Errorf("diagnose: rewrite spec: no ops[%d]", i)
			}
			m := lookup(ops.Content[i], "map")
			if m == nil || m.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("diagnose: rewrite spec: ops[%d] is not a map", i)
			}
			set(m, "parallelism", strconv.Itoa(p))
		}
		var out []*yaml.Node
		add := func(after int) {
			if slices.Contains(plan.PrefetchAfter, after) {
				out = append(out, prefetchNode())
			}
		}
		add(-1)
		for i, n := range ops.Content {
			out = append(out, n)
			add(i)
		}
		if len(ops.Content) > 0 && len(out) > len(ops.Content) {
			ops.Style = 0 // block style: one op per line
		}
		ops.Content = out
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("diagnose: rewrite spec: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("diagnose: rewrite spec: %w", err)
	}
	return buf.Bytes(), nil
}

// blockStyle turns the flow collections under n into block ones.
func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style &^= yaml.FlowStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// lookup returns the value of key in mapping m, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// set sets key in mapping m to the integer v.
func set(m *yaml.Node, key, v string) {
	if n := lookup(m, key); n != nil {
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: v}
		return
	}
	m.Content = append(m.Content, scalar(key), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: v})
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func prefetchNode() *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle, Content: []*yaml.Node{
		scalar("prefetch"),
		{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle, Content: []*yaml.Node{
			scalar("buffer"), {Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(PrefetchBuffer)},
		}},
	}}
}
