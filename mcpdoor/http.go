package mcpdoor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Authenticate checks a bearer token of this door: the principal it acts
// as, and when it ends. A refusal is answered 401 with its message.
type Authenticate func(token string) (Principal, time.Time, error)

// HTTPHandler serves the Streamable HTTP transport, every request
// authenticated anew by its bearer token (a revoked or expired token is
// refused from its next request on), and every session bound to the
// token that opened it.
func (s *Server) HTTPHandler(authn Authenticate) http.Handler {
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		who, expires, err := authn(token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{
			// The SDK refuses a session's requests that come with
			// another token's UserID.
			UserID:     who.TokenID,
			Expiration: expires,
			Extra:      map[string]any{"principal": who},
		}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil)
	return auth.RequireBearerToken(verify, nil)(h)
}

// PrincipalOfRequest is the principal of a call that came over HTTP, set
// by HTTPHandler: what Options.Who answers for a server behind it.
func PrincipalOfRequest(ctx context.Context, req *mcp.CallToolRequest) (Principal, error) {
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		if who, ok := req.Extra.TokenInfo.Extra["principal"].(Principal); ok {
			return who, nil
		}
	}
	return Principal{}, errors.New("the call came without a token")
}

// The headers shedfs mcp sends over the admin socket, where the peer is
// the administrator and names the user (and session) to act as.
const (
	HeaderUser    = "Shedfs-User"
	HeaderSession = "Shedfs-Session"
)

// TrustedHandler serves the Streamable HTTP transport to a peer already
// trusted to act as any user (the admin socket, root only): each request
// names its principal in HeaderUser and HeaderSession. Use it with a
// server whose Who is PrincipalOfHeader.
func (s *Server) TrustedHandler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil)
}

// PrincipalOfHeader is the principal a trusted peer named (TrustedHandler).
func PrincipalOfHeader(ctx context.Context, req *mcp.CallToolRequest) (Principal, error) {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return Principal{}, errors.New("the call names no user")
	}
	who := Principal{User: req.Extra.Header.Get(HeaderUser), Session: req.Extra.Header.Get(HeaderSession)}
	if who.User == "" {
		return Principal{}, errors.New("the call names no user")
	}
	return who, nil
}
