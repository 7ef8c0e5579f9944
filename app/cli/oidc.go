package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/hephaestus-go/hephaestus/server"
)

// The environment variables of sign-in with an OpenID Connect provider
// (docs/security.md). HEPH_OIDC_ISSUER turns it on.
const (
	envOIDCIssuer        = "HEPH_OIDC_ISSUER"
	envOIDCClientID      = "HEPH_OIDC_CLIENT_ID"
	envOIDCClientSecret  = "HEPH_OIDC_CLIENT_SECRET"
	envOIDCRedirectURL   = "HEPH_OIDC_REDIRECT_URL"
	envOIDCRoles         = "HEPH_OIDC_ROLES"
	envOIDCDefaultRole   = "HEPH_OIDC_DEFAULT_ROLE"
	envOIDCUsernameClaim = "HEPH_OIDC_USERNAME_CLAIM"
	envOIDCGroupsClaim   = "HEPH_OIDC_GROUPS_CLAIM"
)

// oidcFromEnv reads the provider's settings and discovers it: nil when
// HEPH_OIDC_ISSUER is not set.
func oidcFromEnv(ctx context.Context, env *Env) (*server.OIDC, error) {
	issuer := env.getenv(envOIDCIssuer)
	if issuer == "" {
		for _, k := range []string{envOIDCClientID, envOIDCClientSecret, envOIDCRedirectURL, envOIDCRoles, envOIDCDefaultRole} {
			if env.getenv(k) != "" {
				return nil, usagef("$%s is set but $%s is not: set the provider's issuer URL too", k, envOIDCIssuer)
			}
		}
		return nil, nil
	}
	roles, err := server.ParseRoles(env.getenv(envOIDCRoles))
	if err != nil {
		return nil, usagef("$%s: %v", envOIDCRoles, err)
	}
	o, err := server.NewOIDC(ctx, &server.OIDCConfig{
		Issuer: issuer, ClientID: env.getenv(envOIDCClientID), ClientSecret: env.getenv(envOIDCClientSecret),
		RedirectURL: env.getenv(envOIDCRedirectURL), Roles: roles, DefaultRole: strings.TrimSpace(env.getenv(envOIDCDefaultRole)),
		UsernameClaim: env.getenv(envOIDCUsernameClaim), GroupsClaim: env.getenv(envOIDCGroupsClaim),
	})
	if err != nil {
		return nil, fmt.Errorf("sign-in with OpenID Connect ($%s): %w", envOIDCIssuer, err)
	}
	return o, nil
}
