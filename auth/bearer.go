package auth

import "strings"

// BearerToken returns the token of an HTTP Authorization header value of
// the form "Bearer <token>". The scheme is matched case-insensitively, and
// white space around the value and between scheme and token is ignored. ok
// is false if header uses another scheme, has no token, or has a token with
// white space inside.
func BearerToken(header string) (token string, ok bool) {
	h := strings.TrimSpace(header)
	i := strings.IndexAny(h, " \t")
	if i < 0 || !strings.EqualFold(h[:i], "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(h[i:])
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", false
	}
	return token, true
}
