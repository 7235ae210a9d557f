package api

// Access tokens (docs/operating/security.md, "Tokens"): an administrator
// creates one for a tenant (or an administrator), its holder sends it
// with its requests (client.Options.Token, --token, FEEDMESH_TOKEN) and
// acts as its principal. The cluster keeps its secret's SHA-256 only.
const (
	MethodTokenCreate = "token.create" // TokenCreateRequest → TokenCreateResponse (administrators only)
	MethodTokenRevoke = "token.revoke" // TokenRevokeRequest (administrators only)
)

// TokenCreateRequest asks for a new token ID of Tenant ("": the default
// tenant), an administrator's if Admin.
type TokenCreateRequest struct {
	ID     string `cbor:"1,keyasint"`
	Tenant string `cbor:"2,keyasint,omitempty"`
	Admin  bool   `cbor:"3,keyasint,omitempty"`
	// Hash is the SHA-256 of the token's secret, chosen by the node the
	// client asked (which answers the secret), set by it only: the
	// leader records it.
	Hash      []byte     `cbor:"4,keyasint,omitempty"`
	Forwarded bool       `cbor:"5,keyasint,omitempty"`
	Caller    *Principal `cbor:"40,keyasint,omitempty"`
}

// TokenCreateResponse is the new token: shown once, kept nowhere.
type TokenCreateResponse struct {
	Token string `cbor:"1,keyasint" json:"token"`
}

// TokenRevokeRequest revokes token ID.
type TokenRevokeRequest struct {
	ID        string     `cbor:"1,keyasint"`
	Forwarded bool       `cbor:"5,keyasint,omitempty"`
	Caller    *Principal `cbor:"40,keyasint,omitempty"`
}

func (r TokenCreateRequest) WasForwarded() bool          { return r.Forwarded }
func (r TokenCreateRequest) ForwardedFor() *Principal    { return r.Caller }
func (r TokenCreateRequest) WithCaller(p *Principal) any { r.Caller = p; return r }
func (r TokenRevokeRequest) WasForwarded() bool          { return r.Forwarded }
func (r TokenRevokeRequest) ForwardedFor() *Principal    { return r.Caller }
func (r TokenRevokeRequest) WithCaller(p *Principal) any { r.Caller = p; return r }
