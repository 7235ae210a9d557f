package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/api/jobspec"
)

// pythonKeywords is run by /usr/bin/python3: for each keyword of the
// Python package's Client.distribute (read with inspect.signature), the
// keys of fm_distribute's options JSON that setting it changes, and
// whether it reaches fm_distribute's checkpoint argument. fm_distribute
// is caught before the library: no library, cluster or numpy is needed.
const pythonKeywords = `
import inspect, json, weakref
from feedmesh import _client, _lib

calls = []
def call(name, *args):
    if name == "fm_distribute":
        calls.append((json.loads(args[4].decode()), args[5]))
_lib.call = call

c = object.__new__(_client.Client)
c.addr, c._handle, c._iters = "test", 1, weakref.WeakSet()
c._iterator = lambda handle, job: None

def run(**kw):
    calls.clear()
    job = kw.pop("job", "j")
    c.distribute({"source": {"range": {"stop": 1}}}, job, **kw)
    return calls[0]

base, base_resume = run()
out = {}
for p in inspect.signature(_client.Client.distribute).parameters:
    if p in ("self", "spec"):
        continue
    try:
        opts, resume = run(**{p: 3})  # 3 passes every keyword's conversion
    except Exception as e:
        out[p] = {"error": repr(e)}
        continue
    out[p] = {"keys": sorted(k for k in set(opts) | set(base) if opts.get(k) != base.get(k)),
              "checkpoint": resume is not None and base_resume is None}
print(json.dumps(out))
`

// TestPythonKeywordsSetEveryOption: every field of a job's options
// (jobspec.Options, reflected) is set by a keyword of the Python
// package's Client.distribute (python/feedmesh/_client.py), which hands
// them to fm_distribute under their JSON names (jobOptions decodes them
// strictly, so a key that is no field's is refused there); and every
// keyword sets one. An option added without its keyword fails here.
func TestPythonKeywordsSetEveryOption(t *testing.T) {
	py := pythonPath()
	if _, err := exec.LookPath(py); err != nil {
		skipOrFail(t, "no Python at %s (set FEEDMESH_PYTHON, or apt-get install python3)", py)
	}
	cmd := exec.Command(py, "-c", pythonKeywords)
	cmd.Env = append(cmd.Environ(), "PYTHONPATH="+filepath.Join("..", "..", "python"), "PYTHONDONTWRITEBYTECODE=1")
	raw, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s", py, err, stderr)
	}
	var keywords map[string]struct {
		Keys       []string `json:"keys"`
		Checkpoint bool     `json:"checkpoint"`
		Error      string   `json:"error"`
	}
	if err := json.Unmarshal(raw, &keywords); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	// notAKeyword lists the options Python has no keyword for, with why:
	// none today.
	notAKeyword := map[string]string{}
	jsonNames := map[string]bool{}
	typ := reflect.TypeOf(jobspec.Options{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		jsonNames[name] = true
		if why, ok := notAKeyword[f.Name]; ok {
			t.Logf("%s: no keyword (%s)", f.Name, why)
			continue
		}
		var by []string
		for kw, r := range keywords {
			if name == "-" && r.Checkpoint || slices.Contains(r.Keys, name) {
				by = append(by, kw)
			}
		}
		switch {
		case len(by) > 0:
			t.Logf("%s (%s): set by %v", f.Name, name, by)
		case name == "-":
			t.Errorf("option %s: no keyword of Client.distribute reaches fm_distribute's checkpoint argument", f.Name)
		default:
			t.Errorf("option %s: no keyword of Client.distribute sets %q in fm_distribute's options: add one to python/feedmesh/_client.py (or to notAKeyword here, saying why)", f.Name, name)
		}
	}
	for kw, r := range keywords {
		switch {
		case r.Error != "":
			t.Errorf("keyword %s=3: %s", kw, r.Error)
		case !r.Checkpoint && !slices.ContainsFunc(r.Keys, func(k string) bool { return jsonNames[k] }):
			t.Errorf("keyword %s sets no option (keys %v)", kw, r.Keys)
		}
	}
}
