package objstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// HostPolicy is the hosts http(s) sources may reach (AccessConfig's
// AllowHosts). A Store whose Config has one checks every request's URL,
// every redirect hop and every address it connects to.
type HostPolicy struct {
	names    map[string]bool
	suffixes []string // ".example.com" for "*.example.com"
	anyName  bool     // "*"
	nets     []netip.Prefix
	// grant, if not nil, narrows the names further (Access.Narrow):
	// every URL and redirect hop must name a host it allows.
	grant hostGrant

	// lookup resolves a name (tests replace it); dial connects to an
	// address already checked.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

func newHostPolicy(allow []string) (*HostPolicy, error) {
	p := &HostPolicy{names: map[string]bool{}}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	p.dial = d.DialContext
	p.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	for _, e := range allow {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
			continue
		case e == "*":
			p.anyName = true
		case strings.Contains(e, "://"):
			return nil, fmt.Errorf("allowed host %q: want a host name, *.domain, *, an IP address or a network (no scheme, port or path)", e)
		case strings.Contains(e, "/"):
			n, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("allowed host %q: not a network (want an address/prefix such as 10.1.0.0/16): %v", e, err)
			}
			p.nets = append(p.nets, n.Masked())
		default:
			if ip, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				p.nets = append(p.nets, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
				continue
			}
			name := strings.TrimSuffix(e, ".")
			wild := strings.HasPrefix(name, "*.")
			if wild {
				name = name[2:]
			}
			if !validHostName(name) {
				return nil, fmt.Errorf("allowed host %q: want a host name, *.domain, *, an IP address or a network (no scheme, port or path)", e)
			}
			if wild {
				p.suffixes = append(p.suffixes, "."+name)
			} else {
				p.names[name] = true
			}
		}
	}
	return p, nil
}

func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// nameAllowed tells whether a host name is in the list (its public
// addresses may be reached).
func (p *HostPolicy) nameAllowed(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if p.anyName || p.names[host] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// special are the networks a name does not allow: loopback, private,
// link-local, shared (CGNAT), unspecified, multicast, reserved, and the
// IPv6 forms that embed an IPv4 address (NAT64, 6to4), which could hide
// one of the others.
var special = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2002::/16",
		"fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// isSpecial tells whether an address is loopback, private, link-local or
// otherwise not a public host's, and which network it is in.
func isSpecial(ip netip.Addr) (bool, string) {
	ip = ip.Unmap().WithZone("")
	for _, n := range special {
		if n.Contains(ip) {
			return true, n.String()
		}
	}
	return false, ""
}

// addrAllowed tells whether an address may be reached: it is in an
// allowed network, or it is public and byName (its host name, or any
// name, is allowed). The reason says why not.
func (p *HostPolicy) addrAllowed(ip netip.Addr, byName bool) (bool, string) {
	ip = ip.Unmap().WithZone("")
	for _, n := range p.nets {
		if n.Contains(ip) {
			return true, ""
		}
	}
	if sp, net := isSpecial(ip); sp {
		return false, fmt.Sprintf("%s is in %s (loopback, private, link-local or reserved): allow its address or network to reach it", ip, net)
	}
	if !byName {
		return false, fmt.Sprintf("%s is not in the allowed hosts", ip)
	}
	return true, ""
}

// checkURL refuses a URL that cannot be allowed whatever its host name
// resolves to: another scheme, a host that is neither allowed by name nor
// an address the list allows, when no network could allow it either.
// Names are checked again, with their addresses, when connecting.
func (p *HostPolicy) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return &DeniedError{Name: u.String(), Reason: "scheme " + u.Scheme + " (http and https only)"}
	}
	if err := p.grant.check(u); err != nil {
		return err
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if ok, why := p.addrAllowed(ip, p.anyName); !ok {
			return &DeniedError{Name: u.String(), Reason: why}
		}
		return nil
	}
	if !p.nameAllowed(host) && len(p.nets) == 0 {
		return &DeniedError{Name: u.String(), Reason: "host " + host + " is not in the allowed hosts"}
	}
	return nil
}

// dialContext connects to addr (host:port) only at addresses the policy
// allows: a name is resolved once and the connection made to the
// addresses checked, so the name cannot resolve elsewhere in between.
func (p *HostPolicy) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ok, why := p.addrAllowed(ip, p.anyName); !ok {
			return nil, &DeniedError{Name: addr, Reason: why}
		}
		return p.dial(ctx, network, addr)
	}
	byName := p.nameAllowed(host)
	if !byName && len(p.nets) == 0 {
		return nil, &DeniedError{Name: addr, Reason: "host " + host + " is not in the allowed hosts"}
	}
	ips, err := p.lookup(ctx, host)
	if err != nil {
		if !byName {
			return nil, &DeniedError{Name: addr, Reason: "host " + host + " is not in the allowed hosts and does not resolve: " + err.Error()}
		}
		return nil, err
	}
	var ok []netip.Addr
	var whys []string
	for _, ip := range ips {
		if yes, why := p.addrAllowed(ip, byName); yes {
			ok = append(ok, ip)
		} else {
			whys = append(whys, why)
		}
	}
	if len(ok) == 0 {
		return nil, &DeniedError{Name: addr, Reason: host + " resolves to no allowed address: " + strings.Join(whys, "; ")}
	}
	var first error
	for _, ip := range ok {
		c, err := p.dial(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// checkRedirect checks every redirect hop's URL (its connection is
// checked again when it is made).
func (p *HostPolicy) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return p.checkURL(req.URL)
}

// transport is an HTTP transport that connects only where the policy
// allows, and never through a proxy (which would connect for it).
func (p *HostPolicy) transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = p.dialContext
	return tr
}
