// GraphQL over HTTP: POST /graphql with the bearer token, and typed errors.

/** A GraphQL (or transport) error with the server's extensions.code. */
export class GraphQLError extends Error {
  /**
   * @param {string} message
   * @param {string} code extensions.code, or NETWORK / HTTP_<status> for transport failures
   * @param {Array} [errors] every GraphQL error of the response
   */
  constructor(message, code, errors = []) {
    super(message);
    this.name = 'GraphQLError';
    this.code = code;
    this.errors = errors;
  }

  /** The first error of a GraphQL errors array, typed. */
  static from(errors) {
    const first = errors?.[0] ?? {};
    return new GraphQLError(first.message || 'request failed', first.extensions?.code || 'ERROR', errors ?? []);
  }
}

/**
 * Runs one operation and returns its data; throws GraphQLError on any error
 * (a partial result is an error here: the dashboard shows nothing half-loaded).
 * onUnauthenticated is called for UNAUTHENTICATED answers (bad or expired token).
 */
export async function graphql({ token, onUnauthenticated }, query, variables = {}) {
  let res;
  try {
    res = await fetch('/graphql', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', Authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables }),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (err) {
    throw new GraphQLError(`the server cannot be reached (${err.message})`, 'NETWORK');
  }
  let body;
  try {
    body = await res.json();
  } catch {
    throw new GraphQLError(`the server answered HTTP ${res.status} without JSON`, `HTTP_${res.status}`);
  }
  if (body.errors?.length) {
    const err = GraphQLError.from(body.errors);
    if (err.code === 'UNAUTHENTICATED' && onUnauthenticated) onUnauthenticated(err);
    throw err;
  }
  if (!res.ok || !body.data) {
    throw new GraphQLError(`the server answered HTTP ${res.status}`, `HTTP_${res.status}`);
  }
  return body.data;
}
