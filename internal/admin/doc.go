// Package admin is the operator's web page of tally serve: both planes'
// health and readiness, uptime and version, the accounts (list, create,
// disable), connection and channel counts, quota use, rate-limit
// refusals and the last error log records, with a link to /metrics.
//
// It is served on the metrics listener only, never on the public ones,
// and behind the internal secret: an Authorization: Bearer header, or a
// login form that takes the secret and sets a session cookie. The page is
// server-rendered HTML with no script. It reads the planes through small
// seams (a readiness function per plane, the directory's operator
// endpoints, a Prometheus gatherer), so it links neither plane.
package admin
