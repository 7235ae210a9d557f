#!/bin/sh
# veth.sh up [--rate RATE] | rate RATE|off | down | status — the veth path of
# `feedmesh-bench transport`: two network namespaces joined by a veth pair
# with MTU 1500, optionally rate-limited.
#
#   fmbench-tx  (sender)    fmb-tx  10.123.0.1/24
#   fmbench-rx  (receiver)  fmb-rx  10.123.0.2/24
#
# The addresses exist only inside the two namespaces; nothing in the host's
# own namespace changes, and traffic between them never leaves the pair.
# `feedmesh-bench transport --path veth` does the same set-up itself (and
# removes it afterwards) unless both namespaces exist already, in which case
# it uses them as they are. Needs root and iproute2.
#
# Rate limit (`up --rate 1gbit`, `rate 1gbit`, `rate off`): a tc tbf qdisc at
# the root of fmb-tx, so the sender's egress (the batches' direction) is
# shaped to RATE (tc's syntax: 1gbit, 500mbit, 100mbit); burst 131072 bytes
# (above a 64 KiB GSO/TSO packet, so tbf passes those whole), queue of 25ms
# at the rate. This is what `feedmesh-bench transport --path veth --rate RATE`
# sets for its run (bench/transportbench/veth.go, same parameters); a run
# without --rate on namespaces shaped here measures under, and reports, this
# limit, and a run with --rate refuses them (veth.sh rate off first).
set -eu

TX_NS=fmbench-tx RX_NS=fmbench-rx
TX_IF=fmb-tx RX_IF=fmb-rx
TX_IP=10.123.0.1 RX_IP=10.123.0.2
MTU=1500
TBF_BURST=131072 TBF_LATENCY=25ms

need() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "veth.sh: skipped: network namespaces need root" >&2
		exit 2
	fi
	if ! command -v ip >/dev/null 2>&1; then
		echo "veth.sh: skipped: the ip command (iproute2) is missing" >&2
		exit 2
	fi
}

need_tc() {
	if ! command -v tc >/dev/null 2>&1; then
		echo "veth.sh: skipped: the rate limit needs the tc command (iproute2)" >&2
		exit 2
	fi
}

up() {
	rate_arg=
	case "${1:-}" in
	"") ;;
	--rate)
		if [ -z "${2:-}" ] || [ -n "${3:-}" ]; then
			echo "usage: $0 up [--rate RATE]" >&2
			exit 2
		fi
		rate_arg=$2
		;;
	*)
		echo "usage: $0 up [--rate RATE]" >&2
		exit 2
		;;
	esac
	need
	if [ -n "$rate_arg" ]; then need_tc; fi
	if ip netns list | grep -qw "$TX_NS" || ip netns list | grep -qw "$RX_NS"; then
		echo "veth.sh: $TX_NS or $RX_NS exists already (veth.sh down removes them)" >&2
		exit 1
	fi
	trap 'down_quiet' EXIT
	ip netns add "$TX_NS"
	ip netns add "$RX_NS"
	ip link add "$TX_IF" netns "$TX_NS" mtu "$MTU" type veth peer name "$RX_IF" netns "$RX_NS" mtu "$MTU"
	ip -n "$TX_NS" addr add "$TX_IP/24" dev "$TX_IF"
	ip -n "$RX_NS" addr add "$RX_IP/24" dev "$RX_IF"
	ip -n "$TX_NS" link set "$TX_IF" up
	ip -n "$RX_NS" link set "$RX_IF" up
	ip -n "$TX_NS" link set lo up
	ip -n "$RX_NS" link set lo up
	if [ -n "$rate_arg" ]; then set_rate "$rate_arg"; fi
	trap - EXIT
	echo "veth.sh: $TX_NS ($TX_IP) <-> $RX_NS ($RX_IP), MTU $MTU"
}

set_rate() {
	tc -n "$TX_NS" qdisc replace dev "$TX_IF" root tbf rate "$1" burst "$TBF_BURST" latency "$TBF_LATENCY"
	echo "veth.sh: $TX_IF egress ($TX_NS -> $RX_NS) shaped to $1 (tbf burst $TBF_BURST latency $TBF_LATENCY)"
}

rate() {
	if [ -z "${1:-}" ] || [ -n "${2:-}" ]; then
		echo "usage: $0 rate RATE|off   (RATE in tc's syntax: 1gbit, 500mbit, 100mbit)" >&2
		exit 2
	fi
	need
	need_tc
	if ! ip netns list | grep -qw "$TX_NS"; then
		echo "veth.sh: $TX_NS does not exist (veth.sh up creates it)" >&2
		exit 1
	fi
	if [ "$1" = off ]; then
		if tc -n "$TX_NS" qdisc show dev "$TX_IF" root | grep -q '^qdisc tbf'; then
			tc -n "$TX_NS" qdisc del dev "$TX_IF" root
		fi
		echo "veth.sh: $TX_IF unshaped"
		return
	fi
	set_rate "$1"
}

down_quiet() {
	ip netns del "$TX_NS" 2>/dev/null || true
	ip netns del "$RX_NS" 2>/dev/null || true
}

down() {
	need
	down_quiet # deleting a namespace deletes its veth end, and with it the pair
	echo "veth.sh: removed $TX_NS and $RX_NS"
}

status() {
	need
	for ns in "$TX_NS" "$RX_NS"; do
		echo "== $ns"
		ip -n "$ns" -br addr 2>/dev/null || echo "(absent)"
	done
	if command -v tc >/dev/null 2>&1; then
		echo "== $TX_IF qdisc"
		tc -n "$TX_NS" qdisc show dev "$TX_IF" root 2>/dev/null || echo "(absent)"
	fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
up) up "$@" ;;
rate) rate "$@" ;;
down) down ;;
status) status ;;
*)
	echo "usage: $0 up [--rate RATE] | rate RATE|off | down | status" >&2
	exit 2
	;;
esac
