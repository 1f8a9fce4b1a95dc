/**
 * A broker's refusal during the AMQP handshake, in words. amqplib reports a refused virtual
 * host as `Expected ConnectionOpenOk; got <ConnectionClose channel:0>`, dropping RabbitMQ's
 * reason (`NOT_ALLOWED - vhost x not found`, or `access to vhost 'x' refused for user 'u'`:
 * the same close, told apart only by its text), and a refused login as `Handshake terminated
 * by server: 403 (ACCESS-REFUSED)`. `description` is the endpoint as shown (its password
 * already hidden); the virtual host and user are read from it. `mechanism` is the SASL login
 * used: with `EXTERNAL` the user is the client certificate's, not the URL's. `undefined` for
 * any other error.
 */
export function describeHandshakeFailure(
  error: unknown,
  description: string,
  mechanism = 'PLAIN',
): string | undefined {
  if (!(error instanceof Error)) return undefined
  const { vhost, user } = addressed(description)
  if (/^Expected ConnectionOpenOk; got <ConnectionClose\b/.test(error.message)) {
    return `the broker refused to open virtual host '${vhost}': it does not exist, or user '${user}' has no access to it (RabbitMQ NOT_ALLOWED: vhost not found, or access to vhost refused). Check the URL's path, or create it and grant access: rabbitmqctl add_vhost '${vhost}'; rabbitmqctl set_permissions -p '${vhost}' '${user}' '.*' '.*' '.*'`
  }
  if (/^Handshake terminated by server: 403\b/.test(error.message) && mechanism === 'EXTERNAL') {
    return `the broker refused the login by client certificate (EXTERNAL, ACCESS_REFUSED): no certificate it accepts was sent, the certificate's user does not exist there, or EXTERNAL is not enabled (the rabbitmq_auth_mechanism_ssl plugin, auth_mechanisms)`
  }
  if (/^Handshake terminated by server: 403\b/.test(error.message)) {
    return `the broker refused the login of user '${user}' (ACCESS_REFUSED): the user name or password is wrong, or the user may not log in from here (RabbitMQ's guest user only logs in from localhost)`
  }
  return undefined
}

/** The virtual host and user an endpoint's description names (`/` and `guest` when it names none). */
function addressed(description: string): { vhost: string; user: string } {
  try {
    const url = new URL(description)
    const path = url.pathname.replace(/^\//, '')
    return {
      vhost: path === '' ? '/' : decodeURIComponent(path),
      user: url.username === '' ? 'guest' : decodeURIComponent(url.username),
    }
  } catch {
    return { vhost: '/', user: 'guest' }
  }
}
