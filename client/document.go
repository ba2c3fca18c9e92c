package client

import "context"

// Query runs a GraphQL query document that the typed methods do not cover
// (e.g. with fields of a newer schema) and decodes its data into out. It
// is retried like every read; the response's errors come back as *Error.
func (c *Client) Query(ctx context.Context, document string, vars map[string]any, out any) error {
	return c.do(ctx, query, document, vars, out)
}

// Mutate runs a GraphQL mutation document that the typed methods do not
// cover and decodes its data into out. It is retried only after
// RATE_LIMITED, which guarantees that nothing was done.
func (c *Client) Mutate(ctx context.Context, document string, vars map[string]any, out any) error {
	return c.do(ctx, command, document, vars, out)
}
