#!/usr/bin/env bash
# sidebyside.sh starts tally serve, nats-server and Centrifugo on
# loopback, runs relaybench against the three in one process (interleaved
# round for round, the same client and flags for each), and stops them.
#
#	bench/relaybench/sidebyside.sh [relaybench flags...]
#
# Environment:
#
#	TALLY       a tally binary (default: built from this tree)
#	TALLY_BEFORE  another tally binary, an older build, run beside the
#	            first on ports 3191 and 8491 as the target "before"
#	NOFLUSH     1 to build tally with -tags benchnoflush (its archive never
#	            fsyncs) and run it on ports 3192 and 8492 as the target
#	            "noflush": the relay's own round trip without the flush,
#	            which the summary sets beside the disk's fdatasync
#	CENTRIFUGO  a centrifugo binary (default: centrifugo on PATH); without
#	            one, Centrifugo is left out. One way to get it:
#	            GOBIN=DIR go install github.com/centrifugal/centrifugo/v6@v6.9.1
#	WORK        a folder for the binaries, data and configuration
#	            (default: a new temporary folder)
#
# The servers:
#
#	tally serve --data WORK/tally-data --quiet --api-addr 127.0.0.1:3190 --relay-addr 127.0.0.1:8490 \
#	  --relay-conns-per-ip 1000000 --relay-conns-per-net 1000000 --max-conns 16384 --metrics-addr 127.0.0.1:9490
#
# relaybench gets -metrics (the acks per flush of the archive in the
# durable cases), -fsync WORK/tally-data (each round also measures the
# disk's 4 KiB write + fdatasync there) and each server's -pid (the
# memory per connection of -idle N). The scale cases:
#
#	sidebyside.sh -subs 1,1000 -latency=false -durable '' -idle 10000 -active 10000 -rate 10
#	nats-server -a 127.0.0.1 -p 4290 -js -sd WORK/nats  (built from the nats-server in go.mod)
#	centrifugo -c WORK/centrifugo.json                    (memory engine, no history, port 8590)
#
# nats-server keeps its default sync of JetStream files (every two minutes:
# an ack survives a crash of its process, not of the machine);
# NATS_SYNC_ALWAYS=1 adds -c WORK/nats.conf holding
# "jetstream { sync_interval: always }", so that it fsyncs every message
# before the ack, as the relay's archive does.
set -euo pipefail

# Each connection of the 10,000-subscriber cases is an open file in the
# server and another in relaybench, and tally serve splits its open-file
# limit between its listeners: raise the limit where allowed (as root, or
# up to the hard limit), so the relay's cap (--max-conns less its login
# reserve) seats them all.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
work=$(cd "$work" && pwd) # absolute: the bench module builds from its own folder

tally=${TALLY:-}
if [ -z "$tally" ]; then
	tally=$work/tally
	go build -o "$tally" ./cli/tally
fi
go build -o "$work/nats-server" github.com/nats-io/nats-server/v2
go -C bench build -o "$work/relaybench" ./relaybench
centrifugo=${CENTRIFUGO:-$(command -v centrifugo || true)}

pids=
stop() {
	for p in $pids; do
		kill "$p" 2>/dev/null || true
	done
	for p in $pids; do
		wait "$p" 2>/dev/null || true
	done
}
trap stop EXIT INT TERM

# await waits until something listens on 127.0.0.1:$1.
await() {
	i=0
	until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
		i=$((i + 1))
		if [ "$i" -gt 100 ]; then
			echo "sidebyside: nothing listens on port $1" >&2
			exit 1
		fi
		sleep 0.1
	done
}

# The benchmark's sockets all come from 127.0.0.1: the relay's shares per
# client address and network would refuse the fan-out's 1000 subscribers.
"$tally" serve --data "$work/tally-data" --quiet --api-addr 127.0.0.1:3190 --relay-addr 127.0.0.1:8490 \
	--relay-conns-per-ip 1000000 --relay-conns-per-net 1000000 --max-conns 16384 --metrics-addr 127.0.0.1:9490 &
pids="$pids $!"
# Each server's process, for the memory of the idle case (-idle).
procs=(-pid "skytale=$!")

natsflags=()
if [ "${NATS_SYNC_ALWAYS:-}" = 1 ]; then
	echo 'jetstream { sync_interval: always }' >"$work/nats.conf"
	natsflags=(-c "$work/nats.conf")
fi
"$work/nats-server" "${natsflags[@]}" -a 127.0.0.1 -p 4290 -js -sd "$work/nats" &
pids="$pids $!"
procs+=(-pid "nats=$!")

targets=skytale
extra=()
if [ -n "${TALLY_BEFORE:-}" ]; then
	"$TALLY_BEFORE" serve --data "$work/tally-before-data" --quiet --api-addr 127.0.0.1:3191 --relay-addr 127.0.0.1:8491 &
	pids="$pids $!"
	procs+=(-pid "before=$!")
	targets=$targets,before
	extra+=(-skytale "before,http://127.0.0.1:3191,http://127.0.0.1:8491,$work/tally-before-data")
	await 3191
	await 8491
fi
if [ "${NOFLUSH:-}" = 1 ]; then
	go build -tags benchnoflush -o "$work/tally-noflush" ./cli/tally
	"$work/tally-noflush" serve --data "$work/tally-noflush-data" --quiet --api-addr 127.0.0.1:3192 --relay-addr 127.0.0.1:8492 \
		--relay-conns-per-ip 1000000 --relay-conns-per-net 1000000 --max-conns 16384 &
	pids="$pids $!"
	procs+=(-pid "noflush=$!")
	targets=$targets,noflush
	extra+=(-skytale "noflush,http://127.0.0.1:3192,http://127.0.0.1:8492,$work/tally-noflush-data")
	await 3192
	await 8492
fi
targets=$targets,nats
if [ -n "$centrifugo" ]; then
	key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	cat >"$work/centrifugo.json" <<JSON
{
  "log": {"level": "error"},
  "http_server": {"address": "127.0.0.1", "port": 8590},
  "engine": {"type": "memory"},
  "client": {"token": {"hmac_secret_key": "$key"}},
  "channel": {"without_namespace": {"allow_subscribe_for_client": true, "allow_publish_for_client": true}}
}
JSON
	chmod 600 "$work/centrifugo.json"
	"$centrifugo" -c "$work/centrifugo.json" &
	pids="$pids $!"
	procs+=(-pid "centrifugo=$!")
	targets=$targets,centrifugo
	extra+=(-centrifugo http://127.0.0.1:8590 -centrifugo-config "$work/centrifugo.json")
	await 8590
fi
await 3190
await 8490
await 9490
await 4290

"$work/relaybench" -target "$targets" \
	-api http://127.0.0.1:3190 -relay http://127.0.0.1:8490 -data "$work/tally-data" \
	-metrics http://127.0.0.1:9490/metrics -fsync "$work/tally-data" \
	-nats nats://127.0.0.1:4290 "${procs[@]}" "${extra[@]}" "$@"
