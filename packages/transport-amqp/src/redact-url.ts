// The URL redaction every package uses lives in core (docs/design.md §9); this package has
// exported `redactUrl` since its first release, so it still does.
export { passwordSpan, redactUrl } from '@acemq/core/spi'
