package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const chart = "helm/feedmesh"

// kubeVersion is the cluster version helm template renders for (the
// chart needs >= 1.30: the preStop sleep action).
const kubeVersion = "1.33.0"

type rendered struct {
	objects []map[string]any
	raw     []byte
}

func (r rendered) find(kind, nameSuffix string) map[string]any {
	for _, o := range r.objects {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] == kind && strings.HasSuffix(md["name"].(string), nameSuffix) {
			return o
		}
	}
	return nil
}

// dig walks a decoded YAML object: keys of maps, indexes of lists.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// render runs helm template with the values files and decodes what it
// prints; kubecheck then decodes every object strictly.
func render(t *testing.T, helm, kubecheck string, values ...string) (rendered, time.Duration, string) {
	t.Helper()
	args := []string{"template", "fm", chart, "--namespace", "ml", "--kube-version", kubeVersion}
	for _, v := range values {
		args = append(args, "-f", v)
	}
	t0 := time.Now()
	out, err := exec.Command(helm, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("helm %v: %v\n%s", args, err, stderr)
	}
	kc := exec.Command(kubecheck)
	kc.Stdin = bytes.NewReader(out)
	res, err := kc.CombinedOutput()
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("strict decode of helm template %v: %v\n%s", values, err, res)
	}
	var r rendered
	r.raw = out
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			break
		}
		if o != nil {
			r.objects = append(r.objects, o)
		}
	}
	return r, took, strings.TrimSpace(lastLines(string(res), 1))
}

// TestHelmChart (issue 43, item 4): helm lint --strict passes; helm
// template renders the chart with its default values and each of ci/
// (every option on; no TLS, one node), and every object decodes strictly
// into the Kubernetes API's Go types (kubecheck: an unknown field is an
// error); the StatefulSet is what feedmesh needs (parallel start, probes
// on /readyz and /livez, the grace covering the drain, the pod's name and
// IP as --name and --advertise, a DNS name as --join, only variables of
// real `feedmesh node` flags), the headless Service publishes pods that
// are not ready, the PodDisruptionBudget lets one node go at a time; a
// misspelled field fails the strict decode, and values that would start
// nodes refusing to run fail the render.
func TestHelmChart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds helm from tools/helm")
	}
	helm := toolBinary(t, "helm", "helm.sh/helm/v3/cmd/helm")
	kubecheck := toolBinary(t, "kubecheck", "./kubecheck")
	_, envs := nodeFlags(t)

	lint := exec.Command(helm, "lint", "--strict", chart, "--kube-version", kubeVersion)
	if out, err := lint.CombinedOutput(); err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
	cis, _ := filepath.Glob(filepath.Join(chart, "ci", "*.yaml"))
	for _, v := range cis {
		if out, err := exec.Command(helm, "lint", "--strict", chart, "--kube-version", kubeVersion, "-f", v).CombinedOutput(); err != nil {
			t.Fatalf("helm lint --strict -f %s: %v\n%s", v, err, out)
		}
	}

	sets := map[string][]string{"default": nil}
	for _, v := range cis {
		sets[filepath.Base(v)] = []string{v}
	}
	for name, values := range sets {
		r, took, summary := render(t, helm, kubecheck, values...)
		t.Logf("%s: helm template + strict decode in %v: %s", name, took.Round(time.Millisecond), summary)
		sts := r.find("StatefulSet", "feedmesh")
		if sts == nil {
			t.Fatalf("%s: no StatefulSet", name)
		}
		spec := dig(sts, "spec", "template", "spec")
		c := dig(spec, "containers", 0)
		if got := dig(sts, "spec", "podManagementPolicy"); got != "Parallel" {
			t.Errorf("%s: podManagementPolicy %v, want Parallel (a node is ready only once bootstrap-expect nodes run)", name, got)
		}
		if got := dig(c, "readinessProbe", "httpGet", "path"); got != "/readyz" {
			t.Errorf("%s: readinessProbe %v", name, got)
		}
		if got := dig(c, "livenessProbe", "httpGet", "path"); got != "/livez" {
			t.Errorf("%s: livenessProbe %v", name, got)
		}
		env := map[string]any{}
		for _, e := range dig(c, "env").([]any) {
			m := e.(map[string]any)
			if v, ok := m["value"]; ok {
				env[m["name"].(string)] = v
			} else {
				env[m["name"].(string)] = dig(m, "valueFrom", "fieldRef", "fieldPath")
			}
		}
		for k := range env {
			if strings.HasPrefix(k, "FEEDMESH_") && !envs[k] {
				t.Errorf("%s: env %s is no flag of feedmesh node", name, k)
			}
		}
		if env["FEEDMESH_NAME"] != "metadata.name" || env["FEEDMESH_ADVERTISE"] != "status.podIP" || env["FEEDMESH_BIND"] != "0.0.0.0" {
			t.Errorf("%s: name %v, advertise %v, bind %v", name, env["FEEDMESH_NAME"], env["FEEDMESH_ADVERTISE"], env["FEEDMESH_BIND"])
		}
		if j, _ := env["FEEDMESH_JOIN"].(string); !strings.HasPrefix(j, "fm-feedmesh-gossip.ml.svc.cluster.local:") {
			t.Errorf("%s: --join %q, want the headless Service's name", name, j)
		}
		grace, _ := dig(spec, "terminationGracePeriodSeconds").(int)
		drain, _ := time.ParseDuration(env["FEEDMESH_DRAIN_TIMEOUT"].(string))
		if time.Duration(grace)*time.Second < drain+10*time.Second {
			t.Errorf("%s: terminationGracePeriodSeconds %d does not cover --drain-timeout %v and the leave", name, grace, drain)
		}
		hl := r.find("Service", "-gossip")
		if dig(hl, "spec", "clusterIP") != "None" || dig(hl, "spec", "publishNotReadyAddresses") != true {
			t.Errorf("%s: headless Service %v", name, dig(hl, "spec"))
		}
		if pdb := r.find("PodDisruptionBudget", "feedmesh"); pdb != nil && dig(pdb, "spec", "maxUnavailable") != 1 {
			t.Errorf("%s: PodDisruptionBudget %v", name, dig(pdb, "spec"))
		}
		if dig(sts, "spec", "volumeClaimTemplates", 0, "metadata", "name") != "data" {
			t.Errorf("%s: no PVC template for the data dir", name)
		}
	}

	// A typo is caught: the strict decode fails on a misspelled field.
	r, _, _ := render(t, helm, kubecheck)
	typo := bytes.Replace(r.raw, []byte("publishNotReadyAddresses"), []byte("publishNotReadyAdresses"), 1)
	kc := exec.Command(kubecheck)
	kc.Stdin = bytes.NewReader(typo)
	if out, err := kc.CombinedOutput(); err == nil || !strings.Contains(string(out), "publishNotReadyAdresses") {
		t.Errorf("a misspelled field decoded: %v\n%s", err, out)
	}
	// The cert-manager example decodes too.
	if out, err := exec.Command(kubecheck, "helm/examples/cert-manager.yaml").CombinedOutput(); err != nil {
		t.Errorf("examples/cert-manager.yaml: %v\n%s", err, out)
	}
	if out, err := exec.Command(kubecheck, "helm/examples/keda-scaledobject.yaml").CombinedOutput(); err != nil {
		t.Errorf("examples/keda-scaledobject.yaml: %v\n%s", err, out)
	}
	// No TLS and not insecure: nodes would refuse to start; the render
	// refuses first.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("tls:\n  enabled: false\n"), 0o644)
	if out, err := exec.Command(helm, "template", "fm", chart, "--kube-version", kubeVersion, "-f", bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "insecure") {
		t.Errorf("tls.enabled false without insecure rendered: %v\n%s", err, out)
	}
}
