#!/bin/sh
# veth.sh up|down|status — the veth path of `feedmesh bench transport`:
# two network namespaces joined by a veth pair with MTU 1500.
#
#   fmbench-tx  (sender)    fmb-tx  10.123.0.1/24
#   fmbench-rx  (receiver)  fmb-rx  10.123.0.2/24
#
# The addresses exist only inside the two namespaces; nothing in the host's
# own namespace changes, and traffic between them never leaves the pair.
# `feedmesh bench transport --path veth` does the same set-up itself (and
# removes it afterwards) unless both namespaces exist already, in which case
# it uses them as they are. Needs root and iproute2.
set -eu

TX_NS=fmbench-tx RX_NS=fmbench-rx
TX_IF=fmb-tx RX_IF=fmb-rx
TX_IP=10.123.0.1 RX_IP=10.123.0.2
MTU=1500

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

up() {
	need
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
	trap - EXIT
	echo "veth.sh: $TX_NS ($TX_IP) <-> $RX_NS ($RX_IP), MTU $MTU"
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
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
*)
	echo "usage: $0 up|down|status" >&2
	exit 2
	;;
esac
