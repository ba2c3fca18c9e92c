// Package mcpserver is Aether Audit's Model Context Protocol interface:
// tools, resources and prompts through which assistants and agents read,
// verify and follow audit evidence with the caller's own permissions.
//
// Like the GraphQL resolvers, it is an interface and nothing more: every
// tool, resource read and subscription runs against a Backend bound to the
// verified caller of that one request. Over Streamable HTTP (mounted at /mcp
// by package server) the Backend is AppBackend: the use cases of package app
// with the identity the server's authentication middleware verified for the
// request, so authorization, tenant and project scoping, rate limits and
// error codes are those of GraphQL. For `aether mcp` (stdio, for desktop
// clients) it is GraphQLBackend: the GraphQL API of a running server, with
// the caller's token.
//
// Tools: search_audit_events, get_audit_event, verify_audit_chain,
// list_webhook_deliveries, get_webhook_delivery, list_data_exports, and the
// commands redrive_webhook_delivery and request_data_export, which need
// confirm: true. Resources: aether://{tenant}/{project}/events (the latest
// page, or with ?after=S the page after sequence S) and
// aether://{tenant}/{project}/events/{sequence}; a subscription to the
// events resource notifies each new event, in sequence order, as
// notifications/resources/updated of its own URI, and with ?after=S first
// replays every event after S, so a client that reconnects misses none.
// Prompts: investigate_incident and review_recorder.
package mcpserver
