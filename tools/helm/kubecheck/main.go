// Command kubecheck decodes Kubernetes manifests (a YAML stream, as `helm
// template` prints it) strictly into the Kubernetes API's Go types
// (k8s.io/api; the Prometheus Operator's for ServiceMonitor): a field the
// type does not have, a field given twice, or a value of the wrong type is
// an error, so that a typo in a chart fails instead of being dropped by
// the API server (or worse, silently ignored by a lenient client).
//
//	helm template feedmesh deploy/helm/feedmesh | kubecheck
//
// It prints one line per object (kind, name) and exits 1 if any object
// fails, listing every failure. It lives in tools/helm, a module of its
// own, so that the product's go.mod does not name Kubernetes.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// types maps apiVersion/kind to a new value of its Go type.
var types = map[string]func() any{
	"v1/ConfigMap":                             func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                                func() any { return &corev1.Secret{} },
	"v1/Service":                               func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                        func() any { return &corev1.ServiceAccount{} },
	"apps/v1/StatefulSet":                      func() any { return &appsv1.StatefulSet{} },
	"apps/v1/Deployment":                       func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget":            func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":       func() any { return &networkingv1.NetworkPolicy{} },
	"autoscaling/v2/HorizontalPodAutoscaler":   func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"rbac.authorization.k8s.io/v1/Role":        func() any { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1/RoleBinding": func() any { return &rbacv1.RoleBinding{} },
	"monitoring.coreos.com/v1/ServiceMonitor":  func() any { return &monitoringv1.ServiceMonitor{} },
	"cert-manager.io/v1/Certificate":           func() any { return &Certificate{} },
	"cert-manager.io/v1/Issuer":                func() any { return &Issuer{} },
	"keda.sh/v1alpha1/ScaledObject":            func() any { return &ScaledObject{} },
}

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	docs, err := split(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var failures []string
	objects := 0
	for _, d := range docs {
		var h header
		if err := yaml.Unmarshal(d.body, &h); err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", d.source, err))
			continue
		}
		if h.Kind == "" && h.APIVersion == "" {
			continue // an empty document (a template that rendered nothing)
		}
		objects++
		what := fmt.Sprintf("%s/%s %s (%s)", h.APIVersion, h.Kind, h.Metadata.Name, d.source)
		mk, ok := types[h.APIVersion+"/"+h.Kind]
		if !ok {
			failures = append(failures, what+": no Go type known for this apiVersion and kind")
			continue
		}
		if err := yaml.UnmarshalStrict(d.body, mk()); err != nil {
			failures = append(failures, what+": "+err.Error())
			continue
		}
		fmt.Printf("ok %s\n", what)
	}
	fmt.Printf("%d objects, %d failed\n", objects, len(failures))
	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintln(os.Stderr, "FAIL "+f)
		}
		os.Exit(1)
	}
}

type doc struct {
	source string // helm's "# Source:" comment, or the document's number
	body   []byte
}

// split cuts a YAML stream at its "---" lines.
func split(r io.Reader) ([]doc, error) {
	var docs []doc
	var cur bytes.Buffer
	source := ""
	n := 0
	flush := func() {
		n++
		if strings.TrimSpace(cur.String()) != "" {
			s := source
			if s == "" {
				s = fmt.Sprintf("document %d", n)
			}
			docs = append(docs, doc{source: s, body: append([]byte(nil), cur.Bytes()...)})
		}
		cur.Reset()
		source = ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " ") == "---" {
			flush()
			continue
		}
		if s, ok := strings.CutPrefix(line, "# Source: "); ok {
			source = s
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush()
	return docs, sc.Err()
}

// The cert-manager objects of the chart's example (cert-manager.io/v1),
// the fields it uses and their neighbours: a subset of cert-manager's
// types, written here so that this module does not import cert-manager;
// a field outside it fails as a typo would.
type Certificate struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   ObjectMeta      `json:"metadata"`
	Spec       CertificateSpec `json:"spec"`
}

type ObjectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type CertificateSpec struct {
	SecretName     string          `json:"secretName"`
	CommonName     string          `json:"commonName,omitempty"`
	DNSNames       []string        `json:"dnsNames,omitempty"`
	IPAddresses    []string        `json:"ipAddresses,omitempty"`
	URIs           []string        `json:"uris,omitempty"`
	Duration       string          `json:"duration,omitempty"`
	RenewBefore    string          `json:"renewBefore,omitempty"`
	IsCA           bool            `json:"isCA,omitempty"`
	Usages         []string        `json:"usages,omitempty"`
	PrivateKey     *PrivateKey     `json:"privateKey,omitempty"`
	IssuerRef      IssuerRef       `json:"issuerRef"`
	SecretTemplate *SecretTemplate `json:"secretTemplate,omitempty"`
	Subject        *X509Subject    `json:"subject,omitempty"`
}

type PrivateKey struct {
	Algorithm      string `json:"algorithm,omitempty"`
	Size           int    `json:"size,omitempty"`
	Encoding       string `json:"encoding,omitempty"`
	RotationPolicy string `json:"rotationPolicy,omitempty"`
}

type IssuerRef struct {
	Name  string `json:"name"`
	Kind  string `json:"kind,omitempty"`
	Group string `json:"group,omitempty"`
}

type SecretTemplate struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type X509Subject struct {
	Organizations       []string `json:"organizations,omitempty"`
	OrganizationalUnits []string `json:"organizationalUnits,omitempty"`
}

type Issuer struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       IssuerSpec `json:"spec"`
}

type IssuerSpec struct {
	SelfSigned *struct{} `json:"selfSigned,omitempty"`
	CA         *struct {
		SecretName string `json:"secretName"`
	} `json:"ca,omitempty"`
}

// ScaledObject is KEDA's (keda.sh/v1alpha1), the fields the chart's
// autoscaling example uses.
type ScaledObject struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   ObjectMeta       `json:"metadata"`
	Spec       ScaledObjectSpec `json:"spec"`
}

type ScaledObjectSpec struct {
	ScaleTargetRef struct {
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind,omitempty"`
		Name       string `json:"name"`
	} `json:"scaleTargetRef"`
	PollingInterval *int `json:"pollingInterval,omitempty"`
	CooldownPeriod  *int `json:"cooldownPeriod,omitempty"`
	MinReplicaCount *int `json:"minReplicaCount,omitempty"`
	MaxReplicaCount *int `json:"maxReplicaCount,omitempty"`
	Triggers        []struct {
		Type     string            `json:"type"`
		Metadata map[string]string `json:"metadata"`
	} `json:"triggers"`
}
