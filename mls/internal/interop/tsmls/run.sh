#!/bin/sh
# Runs the interoperability exchange with ts-mls for cipher suite 0x004D
# and rewrites mls/testdata/xwing-tsmls/. Needs Node.js 20+ and the npm
# registry; see README.md.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$here"
npm ci --no-audit --no-fund
cd "$root"
go test -count=1 -run TestXWingTSMLSRecord ./mls/ -xwing.record=keypackage
(cd "$here" && node interop.mjs produce)
go test -count=1 -run TestXWingTSMLSRecord ./mls/ -xwing.record=group
(cd "$here" && node interop.mjs consume)
go test -count=1 -run 'TestXWingTSMLS' -v ./mls/
