package fsm

import (
	"crypto/sha256"
	"fmt"
	"regexp"
)

// Token is an access token's record (docs/operating/security.md,
// "Tokens"): the principal it makes its holder. The state holds its
// secret's SHA-256 only; the secret is shown once, to whoever created it.
type Token struct {
	// Hash is the SHA-256 of the token's secret.
	Hash []byte `cbor:"1,keyasint" json:"-"`
	// Tenant is the tenant of the token's holder ("": the default one).
	Tenant string `cbor:"2,keyasint,omitempty" json:"tenant,omitempty"`
	// Admin: the holder is an administrator.
	Admin bool `cbor:"3,keyasint,omitempty" json:"admin,omitempty"`
	// CreatedAt is the creating command's At; CreatedBy its principal.
	CreatedAt int64  `cbor:"4,keyasint" json:"created_at"`
	CreatedBy string `cbor:"5,keyasint" json:"created_by"`
}

// maxTokens bounds the tokens the state holds.
const maxTokens = 4096

// validTokenID is a token's name: what a client's name may be.
var validTokenID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidTokenID reports whether id can name a token.
func ValidTokenID(id string) bool { return validTokenID.MatchString(id) }

// putTokenBody is the body of TypePutToken.
type putTokenBody struct {
	ID    string `cbor:"1,keyasint"`
	Token Token  `cbor:"2,keyasint"`
}

// NewPutToken creates token id (its record t, whose CreatedAt the
// command's At sets). It is refused if the id exists (ErrMismatch: revoke
// it first), past maxTokens (ErrLimit), or malformed (a hash of another
// size than SHA-256's, an id or tenant that is not a name). Result: true.
// A node below protocol level ProtocolOwners refuses it (an unknown
// type).
func NewPutToken(id string, t Token) Command {
	t.CreatedAt = 0
	return newCommand(TypePutToken, 1, putTokenBody{ID: id, Token: t})
}

func applyPutToken(s *State, c Command) (any, error) {
	var b putTokenBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if err := checkToken(b.ID, b.Token); err != nil {
		return nil, err
	}
	if _, ok := s.Tokens[b.ID]; ok {
		return nil, fmt.Errorf("%w: token %q exists: revoke it first", ErrMismatch, b.ID)
	}
	if len(s.Tokens) >= maxTokens {
		return nil, fmt.Errorf("%w: %d tokens", ErrLimit, len(s.Tokens))
	}
	t := b.Token
	t.Hash, t.CreatedAt = append([]byte(nil), t.Hash...), c.At
	if s.Tokens == nil {
		s.Tokens = map[string]Token{}
	}
	s.Tokens[b.ID] = t
	return true, nil
}

// checkToken checks a token's record, as a command or a snapshot holds
// it.
func checkToken(id string, t Token) error {
	switch {
	case !validTokenID.MatchString(id):
		return fmt.Errorf("%w: token id %q: use letters, digits, '.', '_' and '-' (at most 128)", ErrInvalidCommand, id)
	case len(t.Hash) != sha256.Size:
		return fmt.Errorf("%w: token %q: a hash of %d bytes, want %d (SHA-256)", ErrInvalidCommand, id, len(t.Hash), sha256.Size)
	case t.Tenant != "" && !validTokenID.MatchString(t.Tenant):
		return fmt.Errorf("%w: token %q: tenant %q is not a name", ErrInvalidCommand, id, t.Tenant)
	case len(t.CreatedBy) > maxNameBytes:
		return fmt.Errorf("%w: token %q: creator of %d bytes, limit %d", ErrInvalidCommand, id, len(t.CreatedBy), maxNameBytes)
	}
	return nil
}

// deleteTokenBody is the body of TypeDeleteToken.
type deleteTokenBody struct {
	ID string `cbor:"1,keyasint"`
}

// NewDeleteToken revokes token id. A missing token is not an error.
// Result: bool, whether it existed.
func NewDeleteToken(id string) Command {
	return newCommand(TypeDeleteToken, 1, deleteTokenBody{ID: id})
}

func applyDeleteToken(s *State, c Command) (any, error) {
	var b deleteTokenBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if err := checkName("token id", b.ID); err != nil {
		return nil, err
	}
	_, ok := s.Tokens[b.ID]
	delete(s.Tokens, b.ID)
	return ok, nil
}

// TokenRecord returns token id's record (its hash copied).
func (s *State) TokenRecord(id string) (Token, bool) {
	t, ok := s.Tokens[id]
	if ok {
		t.Hash = append([]byte(nil), t.Hash...)
	}
	return t, ok
}
